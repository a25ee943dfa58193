// The dashboard's shell: the header (navigation, window, who you are, token, last
// refresh), hash routing, and the refresh loop. The window is kept in the URL's query
// (?range=last-week, ?range=custom&from=2026-11-01&to=2026-11-07), so that a link shows
// the same view; the page is in the hash (#/gpus). Each page is an object with
// `load(ctx)` (fetches everything it shows, for one window) and `render(data)` (updates
// its DOM in place). Refreshing calls both on the same page object, so sort order,
// filters, toggles and scroll position survive.
import {ApiError, getToken, setToken, loadInfo, windowFor, RANGES} from './api.js';
import {h, notice, setCurrency, currencyLabel} from './dom.js';
import {formatTime} from './format.js';
import {FleetPage} from './page_fleet.js';
import {TeamsPage, TeamPage} from './page_teams.js';
import {JobsPage, JobPage} from './page_jobs.js';
import {GpusPage} from './page_gpus.js';
import {RecommendationsPage} from './page_recommendations.js';
import {WastePage, ChargebackPage} from './page_money.js';
import {WhatIfPage} from './page_whatif.js';
import {ExperimentsPage} from './page_experiments.js';
import {SlosPage} from './page_slos.js';

const SPAN_KEY = 'gpuledger.span';
// Set once this server has asked for a token: a fresh tab without one then shows the
// sign-in form at once, rather than asking the API first and logging its 401.
const NEEDS_TOKEN_KEY = 'gpuledger.needs-token';

const ROUTES = [
  {re: /^#\/fleet$/, nav: 'fleet', make: () => new FleetPage()},
  {re: /^#\/teams$/, nav: 'teams', make: () => new TeamsPage()},
  {re: /^#\/teams\/(.+)$/, nav: 'teams', make: (m) => new TeamPage(decodeURIComponent(m[1]))},
  {re: /^#\/jobs$/, nav: 'jobs', make: () => new JobsPage()},
  {re: /^#\/jobs\/(.+)$/, nav: 'jobs', make: (m) => new JobPage(decodeURIComponent(m[1]))},
  {re: /^#\/gpus$/, nav: 'gpus', make: () => new GpusPage()},
  {re: /^#\/recommendations$/, nav: 'recommendations', make: () => new RecommendationsPage()},
  {re: /^#\/waste$/, nav: 'waste', make: () => new WastePage()},
  {re: /^#\/chargeback$/, nav: 'chargeback', make: () => new ChargebackPage()},
  {re: /^#\/experiments$/, nav: 'chargeback', make: () => new ExperimentsPage()},
  {re: /^#\/whatif$/, nav: 'whatif', make: () => new WhatIfPage()},
  {re: /^#\/slos$/, nav: 'slos', make: () => new SlosPage()},
];

const NAV = [
  ['fleet', 'Fleet'],
  ['teams', 'Teams'],
  ['jobs', 'Jobs'],
  ['gpus', 'GPUs'],
  ['waste', 'Waste'],
  ['chargeback', 'Chargeback'],
  ['recommendations', 'Recommendations'],
  ['whatif', 'What-if'],
  ['slos', 'SLOs'],
];

class App {
  constructor() {
    const r = readRange();
    this.span = r.span;
    this.custom = r.custom;
    this.info = null;
    this.page = null;
    this.route = null;
    this.sequence = 0;
    this.timer = null;
    this.main = document.getElementById('main');
    this.status = document.getElementById('status');
    this.buildHeader();
    window.addEventListener('hashchange', () => this.navigate());
    document.addEventListener('visibilitychange', () => {
      if (!document.hidden && this.stale) this.refresh();
    });
  }

  buildHeader() {
    const nav = document.getElementById('nav');
    nav.replaceChildren(...NAV.map(([key, label]) =>
      h('a', {href: `#/${key}`, 'data-nav': key, testid: `nav-${key}`}, label)));
    const spans = document.getElementById('spans');
    this.picker = h('select', {testid: 'range-picker', 'aria-label': 'window', onchange: () => this.setSpan(this.picker.value)},
      ...RANGES.map(([k, label]) => h('option', {value: k}, label)));
    this.picker.value = this.span;
    this.customFrom = h('input', {type: 'date', testid: 'range-from', 'aria-label': 'from', value: this.custom.from || ''});
    this.customTo = h('input', {type: 'date', testid: 'range-to', 'aria-label': 'to (included)', value: this.custom.to || ''});
    this.customForm = h('form', {class: 'custom-range', hidden: this.span !== 'custom',
      onsubmit: (e) => {
        e.preventDefault();
        this.custom = {from: this.customFrom.value, to: this.customTo.value};
        this.setSpan('custom');
      }}, this.customFrom, '–', this.customTo, h('button', {type: 'submit', testid: 'range-apply'}, 'Apply'));
    spans.replaceChildren(this.picker, this.customForm);
    document.getElementById('refresh').addEventListener('click', () => this.refresh());
    document.getElementById('token-form').addEventListener('submit', (e) => {
      e.preventDefault();
      const input = document.getElementById('token-input');
      setToken(input.value.trim());
      input.value = '';
      this.info = null;
      this.refresh();
    });
    document.getElementById('sign-out').addEventListener('click', () => {
      setToken('');
      this.info = null;
      this.refresh();
    });
  }

  setSpan(span) {
    this.span = span;
    this.picker.value = span;
    this.customForm.hidden = span !== 'custom';
    if (span === 'custom' && !(this.custom.from && this.custom.to)) return;  // the form first
    try {
      sessionStorage.setItem(SPAN_KEY, span);
    } catch {
      // not kept: fine
    }
    writeRange(span, this.custom);
    this.refresh();
  }

  navigate() {
    let hash = location.hash || '#/fleet';
    if (hash === '#' || hash === '#/') hash = '#/fleet';
    let route = null;
    let match = null;
    for (const r of ROUTES) {
      match = r.re.exec(hash);
      if (match) {
        route = r;
        break;
      }
    }
    if (!route) {
      location.replace('#/fleet');
      return;
    }
    for (const a of document.querySelectorAll('#nav a')) {
      a.classList.toggle('active', a.dataset.nav === route.nav);
      if (a.dataset.nav === route.nav) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
    this.route = hash;
    this.page = route.make(match);
    document.body.dataset.route = hash;
    this.main.replaceChildren(this.page.el);
    window.scrollTo(0, 0);
    this.refresh();
  }

  // Fetches the info (who, when, targets) and the page's data for the current window,
  // then renders. A newer refresh or navigation makes an older one's answer moot.
  async refresh() {
    const seq = ++this.sequence;
    const page = this.page;
    if (!page) return;
    clearTimeout(this.timer);
    document.body.dataset.state = 'loading';
    this.status.textContent = 'loading…';
    try {
      if (!getToken() && needsToken()) throw new ApiError(401, 'unauthenticated', 'sign in', '');
      const info = await loadInfo();
      if (seq !== this.sequence) return;
      this.info = info;
      const win = windowFor(info, this.span, this.custom);
      setCurrency(info);
      this.showWho(info, win);
      const ctx = {info, win, currency: currencyLabel()};
      const data = await page.load(ctx);
      if (seq !== this.sequence) return;
      // In the document before it draws: charts and the heatmap take its width.
      if (this.main.firstChild !== page.el) this.main.replaceChildren(page.el);
      page.render(data, ctx);
      document.body.dataset.state = 'ready';
      document.body.dataset.refreshes = String(Number(document.body.dataset.refreshes || 0) + 1);
      const at = new Date();
      this.status.replaceChildren(h('time', {datetime: at.toISOString(), testid: 'last-refreshed', title: 'last refreshed'},
        at.toISOString().slice(11, 19)));
      this.stale = false;
    } catch (e) {
      if (seq !== this.sequence) return;
      this.showError(e);
    }
    const seconds = Math.max(5, (this.info && this.info.refresh_seconds) || 30);
    this.timer = setTimeout(() => {
      if (document.hidden) this.stale = true;
      else this.refresh();
    }, seconds * 1000);
  }

  showWho(info, win) {
    const who = document.getElementById('who');
    const role = info.role || 'unknown role';
    const teams = info.role === 'admin' ? 'all teams' : (info.teams || []).join(', ') || 'no teams';
    who.replaceChildren(
      h('span', {class: `role role-${info.role || 'unknown'}`, testid: 'role'}, role),
      ' ',
      h('span', {class: 'who-teams', testid: 'who-teams'}, teams));
    const range = document.getElementById('range');
    range.dataset.from = win.from;
    range.dataset.to = win.to;
    range.dataset.span = win.span;
    range.textContent = `${shortTime(win.from)} – ${shortTime(win.to)} UTC${win.clipped ? '*' : ''}`;
    range.title = `${formatTime(win.from)} – ${formatTime(win.to)}${win.clipped ? ' (* from the first sample: the data begin inside the window)' : ''}`;
    document.body.dataset.from = win.from;
    document.body.dataset.to = win.to;
    // Signed in: only the way out; the token field is for signing in.
    document.getElementById('token-form').hidden = false;
    document.getElementById('sign-out').hidden = !getToken();
    document.getElementById('token-input').hidden = !!getToken();
    document.querySelector('#token-form button[type="submit"]').hidden = !!getToken();
  }

  showError(e) {
    document.body.dataset.state = 'error';
    this.status.textContent = 'refresh failed';
    if (e instanceof ApiError && e.status === 401) {
      this.status.textContent = '';
      document.getElementById('token-form').hidden = true;  // the form below asks for it
      try {
        localStorage.setItem(NEEDS_TOKEN_KEY, '1');
      } catch {
        // not kept: the next fresh tab asks the API first
      }
      this.main.replaceChildren(loginForm(!!getToken(), (token) => {
        setToken(token);
        this.info = null;
        this.main.replaceChildren(this.page.el);
        this.refresh();
      }));
      document.body.dataset.state = 'login';
      return;
    }
    if (e instanceof ApiError && e.status === 404 && this.page && this.page.notFound) {
      this.main.replaceChildren(this.page.el);
      this.page.notFound(e);
      document.body.dataset.state = 'ready';
      return;
    }
    const banner = h('div', {class: 'error-banner', role: 'alert', testid: 'error'},
      `Could not load this page: ${e.message}`);
    if (this.main.firstChild === this.page.el) this.main.replaceChildren(banner, this.page.el);
    else this.main.replaceChildren(banner);
    console.warn(e);
  }
}

function needsToken() {
  try {
    return !!localStorage.getItem(NEEDS_TOKEN_KEY);
  } catch {
    return false;
  }
}

// The window from the URL (?range=...), else the tab's last, else 7 days.
function readRange() {
  const q = new URLSearchParams(location.search);
  const known = (s) => RANGES.some(([k]) => k === s);
  let span = q.get('range');
  if (!known(span)) {
    try {
      span = sessionStorage.getItem(SPAN_KEY);
    } catch {
      span = null;
    }
  }
  if (!known(span)) span = '7d';
  const custom = {from: q.get('from') || '', to: q.get('to') || ''};
  if (span === 'custom' && !(custom.from && custom.to)) span = '7d';
  return {span, custom};
}

function writeRange(span, custom) {
  const q = new URLSearchParams(location.search);
  q.set('range', span);
  if (span === 'custom') {
    q.set('from', custom.from);
    q.set('to', custom.to);
  } else {
    q.delete('from');
    q.delete('to');
  }
  history.replaceState(null, '', `${location.pathname}?${q.toString()}${location.hash}`);
}

// "2026-11-23T00:00:00Z" -> "11-23 00:00".
function shortTime(t) {
  return new Date(t).toISOString().slice(5, 16).replace('T', ' ');
}

function loginForm(hadToken, onToken) {
  const input = h('input', {
    type: 'password',
    id: 'login-token',
    name: 'token',
    autocomplete: 'off',
    placeholder: 'glt_…',
    testid: 'login-token',
    required: true,
  });
  const form = h('form', {class: 'login', testid: 'login-form'},
    h('h2', {}, 'Sign in'),
    hadToken ? notice('The server did not accept this token.', 'warn') : null,
    h('p', {}, 'This server needs a bearer token (from your administrator, made with ',
      h('code', {}, 'gpuledger token'), '). It is kept for this tab only.'),
    h('label', {for: 'login-token'}, 'Token'),
    input,
    h('button', {type: 'submit', testid: 'login-submit'}, 'Sign in'));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    if (input.value.trim()) onToken(input.value.trim());
  });
  return form;
}

const app = new App();
window.gpuledgerApp = app;
app.navigate();
