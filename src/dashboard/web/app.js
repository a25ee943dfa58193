// The dashboard's shell: the header (navigation, window, who you are, token, last
// refresh), hash routing, and the refresh loop. Each page is an object with
// `load(ctx)` (fetches everything it shows, for one window) and `render(data)` (updates
// its DOM in place). Refreshing calls both on the same page object, so sort order,
// filters, toggles and scroll position survive.
import {ApiError, getToken, setToken, loadInfo, windowFor, SPANS} from './api.js';
import {h, notice} from './dom.js';
import {formatTime} from './format.js';
import {FleetPage} from './page_fleet.js';
import {TeamsPage, TeamPage} from './page_teams.js';
import {JobsPage, JobPage} from './page_jobs.js';
import {GpusPage} from './page_gpus.js';
import {RecommendationsPage} from './page_recommendations.js';

const SPAN_KEY = 'gpuledger.span';

const ROUTES = [
  {re: /^#\/fleet$/, nav: 'fleet', make: () => new FleetPage()},
  {re: /^#\/teams$/, nav: 'teams', make: () => new TeamsPage()},
  {re: /^#\/teams\/(.+)$/, nav: 'teams', make: (m) => new TeamPage(decodeURIComponent(m[1]))},
  {re: /^#\/jobs$/, nav: 'jobs', make: () => new JobsPage()},
  {re: /^#\/jobs\/(.+)$/, nav: 'jobs', make: (m) => new JobPage(decodeURIComponent(m[1]))},
  {re: /^#\/gpus$/, nav: 'gpus', make: () => new GpusPage()},
  {re: /^#\/recommendations$/, nav: 'recommendations', make: () => new RecommendationsPage()},
];

const NAV = [
  ['fleet', 'Fleet'],
  ['teams', 'Teams'],
  ['jobs', 'Jobs'],
  ['gpus', 'GPUs'],
  ['recommendations', 'Recommendations'],
];

class App {
  constructor() {
    this.span = readSpan();
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
    spans.replaceChildren(...Object.keys(SPANS).map((s) =>
      h('button', {
        type: 'button',
        'data-span': s,
        testid: `span-${s}`,
        'aria-pressed': String(s === this.span),
        onclick: () => this.setSpan(s),
      }, s)));
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
    try {
      sessionStorage.setItem(SPAN_KEY, span);
    } catch {
      // not kept: fine
    }
    for (const b of document.querySelectorAll('#spans button')) {
      b.setAttribute('aria-pressed', String(b.dataset.span === span));
    }
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
      const info = await loadInfo();
      if (seq !== this.sequence) return;
      this.info = info;
      const win = windowFor(info, this.span);
      this.showWho(info, win);
      const ctx = {info, win, currency: info.currency || ''};
      const data = await page.load(ctx);
      if (seq !== this.sequence) return;
      page.render(data, ctx);
      if (this.main.firstChild !== page.el) this.main.replaceChildren(page.el);
      document.body.dataset.state = 'ready';
      document.body.dataset.refreshes = String(Number(document.body.dataset.refreshes || 0) + 1);
      const at = new Date();
      this.status.replaceChildren('refreshed ', h('time', {datetime: at.toISOString(), testid: 'last-refreshed'},
        at.toISOString().slice(11, 19) + ' UTC'));
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
    const clipped = win.toMs - win.fromMs < SPANS[win.span] * 3600 * 1000;
    range.textContent = `${formatTime(win.from)} – ${formatTime(win.to)}${clipped ? ' (since the first sample)' : ''}`;
    document.body.dataset.from = win.from;
    document.body.dataset.to = win.to;
    document.getElementById('sign-out').hidden = !getToken();
  }

  showError(e) {
    document.body.dataset.state = 'error';
    this.status.textContent = 'refresh failed';
    if (e instanceof ApiError && e.status === 401) {
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

function readSpan() {
  try {
    const s = sessionStorage.getItem(SPAN_KEY);
    if (s && SPANS[s]) return s;
  } catch {
    // no storage
  }
  return '7d';
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
