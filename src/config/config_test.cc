#include "config/config.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>

#include "core/time.h"

namespace gpuledger::config {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// A fresh folder under the system's temporary directory, removed with its files.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> n{0};
    path_ = std::filesystem::temp_directory_path() /
            ("gpuledger-config-test-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string Write(const std::string& name, const std::string& text) const {
    std::string p = (path_ / name).string();
    std::ofstream(p) << text;
    return p;
  }

 private:
  std::filesystem::path path_;
};

// A config that Load refuses, and the start of its message after the file's path.
struct LoadFailure {
  std::string text;
  std::string want;  // after "FILE"
};

void ExpectEachFails(const std::vector<LoadFailure>& cases) {
  TempDir dir;
  for (const LoadFailure& c : cases) {
    std::string path = dir.Write("e.toml", c.text);
    auto r = Load(path);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_THAT(r.status().message(), StartsWith(path + c.want)) << c.text;
  }
}

// Every key of every table, each on a known line.
constexpr const char* kFull = R"toml(db = "fleet.db"
[ledger]
staleness_limit = "45s"
max_future_skew = "2m"
raw_retention = "30d"
[[price]]
model = "NVIDIA H100 80GB HBM3"
pool = "training"
type = "reserved"
per_gpu_hour = "2.49"
from = "2026-01-01T00:00:00Z"
to = "2027-01-01T00:00:00Z"
[[price]]
per_gpu_hour = "1.00"
[targets]
fleet = 0.65
pools = { serving = 0.4, dev = 0.3 }
[budgets]
nlp = "40000.00"
vision = "12500.5"
[server]
listen = "0.0.0.0:9000"
insecure = true
max_body_bytes = 1048576
max_samples_per_batch = 5000
max_sample_age = "7d"
read_timeout = "20s"
write_timeout = "25s"
threads = 8
[server.remote_write]
pool = "k8s"
capacity_type = "spot"
hold_timeout = "90s"
[[server.label_rule]]
label = "namespace"
regex = "team-(.+)"
team = "$1"
project = "p"
[[server.token]]
name = "dash"
role = "viewer"
hash = "sha256:ab:cd"
teams = ["nlp", "vision"]
[[server.scrape]]
url = "http://10.0.0.9:9090"
interval = "30s"
timeout = "5s"
kind = "progress"
job = "train-1"
tokens_metric = "trainer_tokens_seen_total"
model_flops_metric = ""
[agent]
server_url = "http://ledger:8080"
token = "tok"
token_file = "token.txt"
node = "trn-07"
pool = "training"
capacity_type = "reserved"
interval = "500ms"
push_interval = "20s"
spool_dir = "spool"
spool_size = "256MiB"
listen = "127.0.0.1:9400"
mapping_file = "map.toml"
hpc_job_mapping_dir = "hpc"
nvml_library = "libfake.so"
proc_root = "proc"
slurm = false
scontrol = "my-scontrol"
)toml";

TEST(ConfigTest, ReadsEveryKeyOfEveryTable) {
  TempDir dir;
  auto c = Load(dir.Write("full.toml", kFull));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->db_path, "fleet.db");
  EXPECT_EQ(c->ledger.staleness_limit_ms, 45'000);
  EXPECT_EQ(c->ledger.max_future_skew_ms, 120'000);
  EXPECT_EQ(c->ledger.raw_retention_ms, 30 * kMsPerDay);

  ASSERT_TRUE(c->prices.has_value());
  ASSERT_EQ(c->prices->size(), 2u);
  const PriceEntry& h100 = (*c->prices)[0];
  EXPECT_EQ(h100.model, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(h100.pool, "training");
  EXPECT_EQ(h100.capacity_type, CapacityType::kReserved);
  EXPECT_EQ(h100.per_gpu_hour.micros(), 2'490'000);
  EXPECT_EQ(FormatTime(h100.valid.begin_ms), "2026-01-01T00:00:00Z");
  EXPECT_EQ(FormatTime(h100.valid.end_ms), "2027-01-01T00:00:00Z");
  const PriceEntry& rest = (*c->prices)[1];
  EXPECT_EQ(rest.model, "*");
  EXPECT_EQ(rest.pool, "*");
  EXPECT_EQ(rest.capacity_type, CapacityType::kOnDemand);
  EXPECT_EQ(rest.valid, (TimeRange{0, kForever}));

  EXPECT_DOUBLE_EQ(c->goals.fleet_target, 0.65);
  EXPECT_DOUBLE_EQ(c->goals.TargetFor("serving"), 0.4);
  EXPECT_DOUBLE_EQ(c->goals.TargetFor("dev"), 0.3);
  EXPECT_DOUBLE_EQ(c->goals.TargetFor("training"), 0.65);
  EXPECT_EQ(c->goals.monthly_budgets.at("nlp").micros(), 40'000'000'000);
  EXPECT_EQ(c->goals.monthly_budgets.at("vision").micros(), 12'500'500'000);

  const ServerSection& s = c->server;
  EXPECT_TRUE(s.present);
  EXPECT_EQ(s.listen, "0.0.0.0:9000");
  EXPECT_EQ(s.insecure, true);
  EXPECT_EQ(s.max_body_bytes, 1048576);
  EXPECT_EQ(s.max_samples_per_batch, 5000);
  EXPECT_EQ(s.max_sample_age_ms, 7 * kMsPerDay);
  EXPECT_EQ(s.read_timeout_ms, 20'000);
  EXPECT_EQ(s.write_timeout_ms, 25'000);
  EXPECT_EQ(s.threads, 8);
  EXPECT_EQ(s.remote_write_pool, "k8s");
  EXPECT_EQ(s.remote_write_capacity_type, CapacityType::kSpot);
  EXPECT_EQ(s.remote_write_hold_timeout_ms, 90'000);
  ASSERT_EQ(s.label_rules.size(), 1u);
  EXPECT_EQ(s.label_rules[0].label, "namespace");
  EXPECT_EQ(s.label_rules[0].regex, "team-(.+)");
  EXPECT_FALSE(s.label_rules[0].equals.has_value());
  EXPECT_EQ(s.label_rules[0].team, "$1");
  EXPECT_EQ(s.label_rules[0].project, "p");
  ASSERT_EQ(s.tokens.size(), 1u);
  EXPECT_EQ(s.tokens[0].name, "dash");
  EXPECT_EQ(s.tokens[0].role, "viewer");
  EXPECT_EQ(s.tokens[0].hash, "sha256:ab:cd");
  EXPECT_EQ(s.tokens[0].teams, (std::vector<std::string>{"nlp", "vision"}));
  ASSERT_EQ(s.scrapes.size(), 1u);
  EXPECT_EQ(s.scrapes[0].url, "http://10.0.0.9:9090");
  EXPECT_EQ(s.scrapes[0].interval_ms, 30'000);
  EXPECT_EQ(s.scrapes[0].timeout_ms, 5'000);
  EXPECT_EQ(s.scrapes[0].kind, "progress");
  EXPECT_EQ(s.scrapes[0].job, "train-1");
  EXPECT_EQ(s.scrapes[0].tokens_metric, "trainer_tokens_seen_total");
  EXPECT_EQ(s.scrapes[0].model_flops_metric, "");

  const AgentSection& a = c->agent;
  EXPECT_EQ(a.server_url, "http://ledger:8080");
  EXPECT_EQ(a.token, "tok");
  EXPECT_EQ(a.token_file, "token.txt");
  EXPECT_EQ(a.node, "trn-07");
  EXPECT_EQ(a.pool, "training");
  EXPECT_EQ(a.capacity_type, CapacityType::kReserved);
  EXPECT_EQ(a.interval_ms, 500);
  EXPECT_EQ(a.push_interval_ms, 20'000);
  EXPECT_EQ(a.spool_dir, "spool");
  EXPECT_EQ(a.spool_max_bytes, uint64_t{256} << 20);
  EXPECT_EQ(a.listen, "127.0.0.1:9400");
  EXPECT_EQ(a.mapping_file, "map.toml");
  EXPECT_EQ(a.hpc_job_mapping_dir, "hpc");
  EXPECT_EQ(a.nvml_library, "libfake.so");
  EXPECT_EQ(a.proc_root, "proc");
  EXPECT_EQ(a.slurm, false);
  EXPECT_EQ(a.scontrol, "my-scontrol");
}

TEST(ConfigTest, AnAbsentKeyIsLeftToTheSubsystem) {
  TempDir dir;
  auto c = Load(dir.Write("empty.toml", "# nothing set\n"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FALSE(c->db_path.has_value());
  EXPECT_FALSE(c->ledger.staleness_limit_ms.has_value());
  EXPECT_FALSE(c->prices.has_value()) << "no [[price]]: the store's price book stays";
  EXPECT_FALSE(c->server.present);
  EXPECT_FALSE(c->server.listen.has_value());
  EXPECT_FALSE(c->agent.interval_ms.has_value());
  EXPECT_DOUBLE_EQ(c->goals.fleet_target, 0.6);
  EXPECT_TRUE(c->goals.pool_targets.empty());
  EXPECT_EQ(c->goals.fleet_target_source, Goals::kDefaultSource);
}

// The store may be named by `db` or by [store] url (a PostgreSQL URL reads best there),
// never by both: two places saying where the data lives is a mistake to report.
TEST(ConfigTest, TheStoreIsNamedByDbOrByStoreUrlNotBoth) {
  TempDir dir;
  auto url = Load(dir.Write("url.toml", "[store]\nurl = \"postgresql://gpl@db.example/ledger\"\n"));
  ASSERT_TRUE(url.ok()) << url.status().ToString();
  EXPECT_EQ(url->db_path, "postgresql://gpl@db.example/ledger");
  auto both = Load(dir.Write("both.toml", "db = \"fleet.db\"\n\n[store]\nurl = \"postgresql:///ledger\"\n"));
  ASSERT_FALSE(both.ok());
  EXPECT_THAT(both.status().message(), ::testing::HasSubstr("both.toml:4"));
  EXPECT_THAT(both.status().message(), ::testing::HasSubstr("keep either the top-level db or [store] url"));
  auto stray = Load(dir.Write("stray.toml", "[store]\npath = \"x\"\n"));
  ASSERT_FALSE(stray.ok());
  EXPECT_THAT(stray.status().message(), ::testing::HasSubstr("store.path"));
}

// [store] day_cache_size sizes each store's memory of whole days' day rows, a size like
// any other: positive, in bytes or with a unit.
TEST(ConfigTest, StoreDayCacheSizeIsASize) {
  TempDir dir;
  auto cache = Load(dir.Write("cache.toml", "[store]\nday_cache_size = \"1GiB\"\n"));
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  EXPECT_EQ(cache->day_cache_bytes, uint64_t{1} << 30);
  EXPECT_FALSE(cache->db_path.has_value());
  auto no_cache = Load(dir.Write("no_cache.toml", "[store]\nday_cache_size = 0\n"));
  ASSERT_FALSE(no_cache.ok());
  EXPECT_THAT(no_cache.status().message(), ::testing::HasSubstr("store.day_cache_size"));
}

// A stray key in any table is refused with the file, its line and its dotted name; the
// lines before it are valid, so the line in the message is the stray key's own.
TEST(ConfigTest, UnknownKeysAreErrorsInEveryTable) {
  struct Case {
    std::string text;
    int line;
    std::string key;
  };
  const std::vector<Case> cases = {
      {"db = \"x\"\nbogus = 1\n", 2, "bogus"},
      {"[ledger]\nraw_retention = \"1d\"\nbogus = 1\n", 3, "ledger.bogus"},
      {"[[price]]\nper_gpu_hour = \"1.00\"\nbogus = 1\n", 3, "price.bogus"},
      // The currency is the whole book's ([prices]), never one entry's.
      {"[[price]]\nper_gpu_hour = \"1.00\"\ncurrency = \"USD\"\n", 3, "price.currency"},
      {"[prices]\ncurrency = \"EUR\"\nbogus = 1\n", 3, "prices.bogus"},
      {"[[price]]\nper_gpu_hour = \"1.00\"\n[[price]]\nper_gpu_hour = \"2.00\"\npool = \"a\"\nbogus = 1\n", 6,
       "price.bogus"},
      {"[targets]\nfleet = 0.5\nbogus = 1\n", 3, "targets.bogus"},
      {"[server]\nlisten = \"x:1\"\nbogus = 1\n", 3, "server.bogus"},
      {"[server.remote_write]\npool = \"p\"\nbogus = 1\n", 3, "server.remote_write.bogus"},
      {"[[server.label_rule]]\nlabel = \"ns\"\nbogus = 1\n", 3, "server.label_rule.bogus"},
      {"[[server.token]]\nname = \"t\"\nbogus = 1\n", 3, "server.token.bogus"},
      {"[[server.scrape]]\nurl = \"http://h:1/\"\nbogus = 1\n", 3, "server.scrape.bogus"},
      {"[agent]\nnode = \"n\"\nbogus = 1\n", 3, "agent.bogus"},
      {"[[objective]]\nname = \"o\"\ntarge = \"65%\"\n", 3, "objective.targe"},
      {"[[intervention]]\nname = \"r\"\nbogus = 1\n", 3, "intervention.bogus"},
      {"[alerting]\nbogus = 1\n", 2, "alerting.bogus"},
      {"[[alerting.alertmanager]]\nurl = \"http://a:9093\"\nbogus = 1\n", 3, "alerting.alertmanager.bogus"},
      {"[[alerting.slack]]\nurl = \"http://a/\"\n", 2, "alerting.slack.url"},
      {"[[alerting.webhook]]\nurl = \"http://a/\"\nbogus = 1\n", 3, "alerting.webhook.bogus"},
  };
  TempDir dir;
  for (const Case& c : cases) {
    std::string path = dir.Write("c.toml", c.text);
    auto r = Load(path);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_THAT(r.status().message(),
                StartsWith(fmt::format("{}:{}: {}: unknown key", path, c.line, c.key)))
        << c.text;
  }
}

// A bad value is reported at its own line, not at its table's.
// Reserved capacity bought up front: the purchase spread over its term's GPU-hours.
TEST(ConfigTest, AReservedPurchaseBecomesItsAmortizedHourlyPrice) {
  TempDir dir;
  auto c = Load(dir.Write("reserved.toml", R"toml(
[[price]]
model = "NVIDIA H200"
purchase = "500000.00"
gpus = 8
from = "2026-01-01T00:00:00Z"
to = "2029-01-01T00:00:00Z"
)toml"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->prices->size(), 1u);
  const PriceEntry& e = (*c->prices)[0];
  EXPECT_EQ(e.capacity_type, CapacityType::kReserved);  // a purchase is reserved capacity
  // 2026-2028 is 1096 days (2028 is a leap year): 26,304 hours x 8 GPUs = 210,432 GPU-hours;
  // 500,000 / 210,432 = 2.3760644... per GPU-hour, rounded half up to the micro-unit.
  EXPECT_EQ(e.per_gpu_hour.ToString(), "2.376064");
  EXPECT_EQ(e.valid, (TimeRange{*ParseTime("2026-01-01T00:00:00Z"), *ParseTime("2029-01-01T00:00:00Z")}));
}

TEST(ConfigTest, BadValuesNameTheLineOfTheValue) {
  using Case = LoadFailure;
  const std::vector<Case> cases = {
      {"db = 3\n", ":1: db: want a string"},
      {"[ledger]\n\nstaleness_limit = \"soon\"\n", ":3: ledger.staleness_limit: duration \"soon\""},
      {"[ledger]\nraw_retention = 30\n", ":2: ledger.raw_retention: want a duration string"},
      {"[[price]]\nmodel = \"m\"\ntype = \"cheap\"\nper_gpu_hour = \"1\"\n", ":3: price.type: capacity type \"cheap\""},
      {"[[price]]\nmodel = \"m\"\nper_gpu_hour = 2.49\n", ":3: price.per_gpu_hour: want a decimal string"},
      {"[[price]]\nmodel = \"m\"\nper_gpu_hour = \"-1\"\n", ":3: price.per_gpu_hour: a price cannot be negative"},
      {"[[price]]\nper_gpu_hour = \"1\"\nmodel = \"m\"\nfrom = \"2026-01-01T00:30:00Z\"\n",
       ":4: price.from: prices change on whole UTC hours"},
      {"[[price]]\nper_gpu_hour = \"1\"\nfrom = \"2026-02-01T00:00:00Z\"\nto = \"2026-01-01T00:00:00Z\"\n",
       ":4: price.to: must be after from"},
      {"[[price]]\nper_gpu_hour = \"1\"\nto = \"tomorrow\"\n", ":3: price.to:"},
      {"[[price]]\nmodel = \"m\"\n", ":1: [[price]]: per_gpu_hour is required"},
      {"[[price]]\nper_gpu_hour = \"1\"\n[[price]]\nper_gpu_hour = \"2\"\n", ":3: [[price]]: price[1]"},
      {"[[price]]\nper_gpu_hour = \"1\"\npurchase = \"100\"\n", ":3: price.purchase: give per_gpu_hour or purchase"},
      {"[[price]]\npurchase = \"100\"\nfrom = \"2026-01-01T00:00:00Z\"\n",
       ":2: price.purchase: a purchase needs its term: give to too"},
      {"[[price]]\ntype = \"spot\"\npurchase = \"100\"\nfrom = \"2026-01-01T00:00:00Z\"\nto = \"2026-02-01T00:00:00Z\"\n",
       ":2: price.type: a purchase is reserved capacity"},
      {"[[price]]\nper_gpu_hour = \"1\"\ngpus = 8\n", ":3: price.gpus: only with purchase"},
      {"[[price]]\npurchase = \"100\"\nfrom = \"2026-01-01T00:00:00Z\"\nto = \"2026-02-01T00:00:00Z\"\ngpus = 0\n",
       ":5: price.gpus: want a positive integer"},
      {"[[price]]\npurchase = \"-100\"\nfrom = \"2026-01-01T00:00:00Z\"\nto = \"2026-02-01T00:00:00Z\"\n",
       ":2: price.purchase: purchase -100.000000: cannot be negative"},
      {"[targets]\nfleet = 1.5\n", ":2: targets.fleet: want a ratio in 0..1"},
      {"[targets]\npools = { serving = \"low\" }\n", ":2: targets.pools.serving: want a ratio in 0..1"},
      {"[targets]\n[targets.pools]\ndev = 0.3\nserving = -1\n", ":4: targets.pools.serving: want a ratio"},
      {"[budgets]\nnlp = 40000\n", ":2: budgets.nlp: want a decimal string"},
      {"[budgets]\nnlp = \"1\"\nvision = \"-5\"\n", ":3: budgets.vision: a budget must be a positive amount"},
      {"[server]\nlisten = 8080\n", ":2: server.listen: want a string"},
      {"[server]\nthreads = 0\n", ":2: server.threads: want a positive integer"},
      {"[server]\ninsecure = \"yes\"\n", ":2: server.insecure: want true or false"},
      {"[server.remote_write]\npool = \"p\"\nhold_timeout = \"soon\"\n", ":3: server.remote_write.hold_timeout:"},
      {"[server.remote_write]\ncapacity_type = \"free\"\n", ":2: server.remote_write.capacity_type:"},
      {"[[server.token]]\nname = \"t\"\nteams = [\"a\", 3]\n", ":3: server.token.teams: want a list of strings"},
      {"[[server.label_rule]]\nlabel = \"ns\"\n", ":1: [[server.label_rule]]: needs label and one of"},
      {"[[server.scrape]]\nurl = \"http://h:1/\"\ninterval = \"often\"\n", ":3: server.scrape.interval:"},
      {"[agent]\nnode = \"n\"\ninterval = \"fast\"\n", ":3: agent.interval: duration \"fast\""},
      {"[agent]\nspool_size = \"1 parsec\"\n", ":2: agent.spool_size: size \"1 parsec\": unknown unit"},
      {"[agent]\nspool_size = -5\n", ":2: agent.spool_size: want a positive size"},
      {"[agent]\nslurm = 1\n", ":2: agent.slurm: want true or false"},
      {"ledger = 3\n", ":1: ledger: want a table"},
      {"price = 3\n", ":1: price: want [[price]] tables"},
      {"db = \"x\"\ndb2 = \n", ":2:"},  // a TOML syntax error: FILE:LINE:COLUMN
  };
  TempDir dir;
  for (const Case& c : cases) {
    std::string path = dir.Write("v.toml", c.text);
    auto r = Load(path);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_THAT(r.status().message(), StartsWith(path + c.want)) << c.text;
  }
}

// One grammar for every duration key of every table (core's ParseDuration).
TEST(ConfigTest, EveryDurationKeyReadsTheSameGrammar) {
  const std::vector<std::pair<std::string, std::string>> keys = {
      {"ledger", "staleness_limit"}, {"ledger", "max_future_skew"},  {"ledger", "raw_retention"},
      {"ledger", "retire_after"},
      {"server", "max_sample_age"},  {"server", "read_timeout"},     {"server", "write_timeout"},
      {"server.remote_write", "hold_timeout"}, {"agent", "interval"}, {"agent", "push_interval"},
  };
  const std::vector<std::pair<std::string, int64_t>> good = {
      {"500ms", 500}, {"1s", 1'000}, {"1m30s", 90'000}, {"1h", kMsPerHour}, {"2d", 2 * kMsPerDay}, {"1w", 7 * kMsPerDay}};
  TempDir dir;
  auto read = [](const Config& c, const std::string& table, const std::string& key) -> std::optional<int64_t> {
    if (key == "staleness_limit") return c.ledger.staleness_limit_ms;
    if (key == "max_future_skew") return c.ledger.max_future_skew_ms;
    if (key == "raw_retention") return c.ledger.raw_retention_ms;
    if (key == "retire_after") return c.ledger.retire_after_ms;
    if (key == "max_sample_age") return c.server.max_sample_age_ms;
    if (key == "read_timeout") return c.server.read_timeout_ms;
    if (key == "write_timeout") return c.server.write_timeout_ms;
    if (key == "hold_timeout") return c.server.remote_write_hold_timeout_ms;
    if (key == "interval") return c.agent.interval_ms;
    if (table == "agent" && key == "push_interval") return c.agent.push_interval_ms;
    return std::nullopt;
  };
  for (const auto& [table, key] : keys) {
    for (const auto& [text, ms] : good) {
      auto c = Load(dir.Write("d.toml", fmt::format("[{}]\n{} = \"{}\"\n", table, key, text)));
      ASSERT_TRUE(c.ok()) << table << "." << key << " = " << text << ": " << c.status().ToString();
      EXPECT_EQ(read(*c, table, key), ms) << table << "." << key << " = " << text;
    }
    for (const char* bad : {"10", "1.5s", "0s", "-1s", "1y", "fast", ""}) {
      std::string path = dir.Write("d.toml", fmt::format("[{}]\n{} = \"{}\"\n", table, key, bad));
      auto c = Load(path);
      ASSERT_FALSE(c.ok()) << table << "." << key << " = " << bad;
      EXPECT_THAT(c.status().message(), StartsWith(fmt::format("{}:2: {}.{}: duration", path, table, key)));
    }
  }
  // The scrape targets' keys too, inside an array of tables.
  auto c = Load(dir.Write("d.toml", "[[server.scrape]]\nurl = \"http://h:1/\"\ninterval = \"1m30s\"\ntimeout = \"750ms\"\n"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server.scrapes.at(0).interval_ms, 90'000);
  EXPECT_EQ(c->server.scrapes.at(0).timeout_ms, 750);
}

TEST(ConfigTest, ParsesByteSizes) {
  EXPECT_EQ(*ParseByteSize("1GiB"), uint64_t{1} << 30);
  EXPECT_EQ(*ParseByteSize("512 MiB"), uint64_t{512} << 20);
  EXPECT_EQ(*ParseByteSize("1000"), 1000u);
  EXPECT_EQ(*ParseByteSize("2GB"), 2'000'000'000u);
  EXPECT_FALSE(ParseByteSize("GiB").ok());
  EXPECT_FALSE(ParseByteSize("99999999999TiB").ok());
  EXPECT_THAT(ParseByteSize("3 parsec").status().message(), HasSubstr("unknown unit \"parsec\""));
}

// Each target knows the line it was set on, so that every command can say which target
// it used and where it came from.
TEST(ConfigTest, TargetsCarryWhereTheyWereSet) {
  TempDir dir;
  std::string path = dir.Write("t.toml", "[targets]\nfleet = 0.65\n[targets.pools]\ndev = 0.3\n");
  auto c = Load(path);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->goals.fleet_target_source, path + ":2");
  EXPECT_EQ(c->goals.TargetSourceFor("dev"), path + ":4");
  EXPECT_EQ(c->goals.TargetSourceFor("training"), path + ":2") << "a pool without its own has the fleet's";
  EXPECT_EQ(c->goals.Describe(), fmt::format("targets: fleet 65% ({}:2); pool dev 30% ({}:4)", path, path));
  EXPECT_EQ(Goals{}.Describe(), "targets: fleet 60% (built-in default)");
}

TEST(ConfigTest, WhereNamesTheFileTheFlagOrTheDefault) {
  Where w("a.toml", 3, "agent");
  w.SetLine("interval", 5);
  EXPECT_EQ(w.Of("interval"), "a.toml:5: agent.interval");
  EXPECT_EQ(w.Source("interval"), "a.toml:5");
  EXPECT_EQ(w.Of("node"), "agent.node");
  EXPECT_EQ(w.Source("node"), "");
  w.SetFlag("interval", "--interval");
  EXPECT_EQ(w.Of("interval"), "--interval");
  EXPECT_EQ(w.Table(), "a.toml:3: [agent]");
}

TEST(ConfigTest, WrittenGoalsAndPricesReadBackTheSame) {
  Goals goals;
  goals.fleet_target = 0.65;
  goals.pool_targets = {{"serving", 0.4}, {"dev", 0.3}, {"odd pool", 0.55}};
  goals.monthly_budgets = {{"nlp", *Money::Parse("90000.00")}, {"speech", *Money::Parse("0.000001")}};
  std::vector<PriceEntry> prices = {
      {"NVIDIA H100 80GB HBM3", "*", CapacityType::kReserved, *Money::Parse("2.49"), {0, kForever}},
      {"*", "dev \"x\"", CapacityType::kSpot, *Money::Parse("0.5"), {*ParseTime("2026-01-01T00:00:00Z"), *ParseTime("2026-02-01T00:00:00Z")}},
  };
  TempDir dir;
  auto c = Load(dir.Write("demo.toml", WriteGoalsAndPrices(goals, prices, "a \\ \"b\".db")));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->db_path, "a \\ \"b\".db");
  EXPECT_EQ(c->goals.fleet_target, goals.fleet_target);
  EXPECT_EQ(c->goals.pool_targets, goals.pool_targets);
  EXPECT_EQ(c->goals.monthly_budgets, goals.monthly_budgets);
  ASSERT_TRUE(c->prices.has_value());
  ASSERT_EQ(c->prices->size(), prices.size());
  for (size_t i = 0; i < prices.size(); ++i) {
    EXPECT_EQ((*c->prices)[i].model, prices[i].model);
    EXPECT_EQ((*c->prices)[i].pool, prices[i].pool);
    EXPECT_EQ((*c->prices)[i].capacity_type, prices[i].capacity_type);
    EXPECT_EQ((*c->prices)[i].per_gpu_hour, prices[i].per_gpu_hour);
    EXPECT_EQ((*c->prices)[i].valid, prices[i].valid);
  }
}

TEST(ConfigTest, PriceFilesHoldOnlyPrices) {
  TempDir dir;
  auto ok = LoadPriceFile(dir.Write("p.toml", "[[price]]\nper_gpu_hour = \"3.60\"\n"));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->at(0).per_gpu_hour.micros(), 3'600'000);
  std::string path = dir.Write("q.toml", "[[price]]\nper_gpu_hour = \"3.60\"\ncurrency = \"EUR\"\n");
  EXPECT_THAT(LoadPriceFile(path).status().message(), StartsWith(path + ":3: price.currency: unknown key"));
  // The currency is the config's, not a price file's: the store keeps the entries only.
  path = dir.Write("s.toml", "[prices]\ncurrency = \"EUR\"\n[[price]]\nper_gpu_hour = \"3.60\"\n");
  EXPECT_THAT(LoadPriceFile(path).status().message(),
              StartsWith(path + ":1: prices: a price file holds [[price]] tables only"));
  path = dir.Write("r.toml", "[targets]\nfleet = 0.5\n");
  EXPECT_THAT(LoadPriceFile(path).status().message(), StartsWith(path + ":1: targets: unknown key"));
}

TEST(ConfigTest, ThePriceBookHasOneCurrencyOrOneNamedUnit) {
  TempDir dir;
  std::string a = dir.Write("a.toml", "db = \"x.db\"\n[prices]\ncurrency = \"EUR\"\n");
  auto eur = Load(a);
  ASSERT_TRUE(eur.ok()) << eur.status().ToString();
  ASSERT_TRUE(eur->currency.has_value());
  EXPECT_EQ(eur->currency->kind(), Currency::Kind::kIso4217);
  EXPECT_EQ(eur->currency->name(), "EUR");
  EXPECT_EQ(eur->currency_source, a + ":3");

  auto credits = Load(dir.Write("b.toml", "[prices]\nunit = \"GPU credits\"\n"));
  ASSERT_TRUE(credits.ok()) << credits.status().ToString();
  EXPECT_EQ(credits->currency->kind(), Currency::Kind::kUnit);
  EXPECT_EQ(credits->currency->Label(), "GPU credits");

  auto none = Load(dir.Write("c.toml", "db = \"x.db\"\n"));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->currency.has_value()) << "unset: an unnamed unit, never a default currency";

  struct Bad {
    std::string text;
    std::string message;  // after "FILE:"
  };
  for (const Bad& b : std::vector<Bad>{
           {"[prices]\ncurrency = \"EUX\"\n", "2: prices.currency: currency \"EUX\": not an ISO 4217 code"},
           {"[prices]\ncurrency = \"eur\"\n", "2: prices.currency: currency \"eur\": ISO 4217 codes are upper case"},
           {"[prices]\ncurrency = \"GPU credits\"\n",
            "2: prices.currency: currency \"GPU credits\": not an ISO 4217 code (e.g. \"EUR\", \"USD\"); for an "
            "internal unit set [prices] unit = \"GPU credits\" instead"},
           {"[prices]\nunit = \"usd\"\n", "2: prices.unit: unit \"usd\": that is the ISO 4217 code USD"},
           {"[prices]\ncurrency = 978\n", "2: prices.currency: want a string"},
           {"[prices]\ncurrency = \"EUR\"\nunit = \"GPU credits\"\n",
            "3: prices.unit: set currency (an ISO 4217 code) or unit (an internal unit's name), not both"},
           {"[prices]\n", "1: [prices]: want currency = \"EUR\" (ISO 4217) or unit = \"GPU credits\""},
       }) {
    std::string path = dir.Write("bad.toml", b.text);
    auto r = Load(path);
    ASSERT_FALSE(r.ok()) << b.text;
    EXPECT_THAT(r.status().message(), StartsWith(path + ":" + b.message)) << b.text;
  }
}

TEST(ConfigTest, TheCurrencyIsWrittenAndReadBack) {
  TempDir dir;
  for (const Currency& currency : {*Currency::Iso4217("CHF"), *Currency::Unit("GPU \"credits\""), Currency()}) {
    auto c = Load(dir.Write("w.toml", WriteGoalsAndPrices(Goals{}, {}, "", currency)));
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(c->currency.value_or(Currency()), currency) << currency.Label();
  }
}

// The examples the docs and deploy/ give are read as they stand.
TEST(ConfigTest, TheShippedExamplesLoad) {
  auto agent = Load(std::string(GPULEDGER_SOURCE_DIR) + "/deploy/agent.toml");
  EXPECT_TRUE(agent.ok()) << agent.status().ToString();
  TempDir dir;
  int blocks = 0;
  for (const char* name : {"configuration.md", "objectives.md"}) {
    std::ifstream doc(std::string(GPULEDGER_SOURCE_DIR) + "/docs/" + name);
    ASSERT_TRUE(doc) << name;
    std::string line, block;
    bool in_block = false;
    while (std::getline(doc, line)) {
      if (line == "```toml") {
        in_block = true;
        block.clear();
      } else if (in_block && line == "```") {
        in_block = false;
        ++blocks;
        auto c = Load(dir.Write("example.toml", block));
        EXPECT_TRUE(c.ok()) << "docs/" << name << " example " << blocks << ": " << c.status().ToString();
      } else if (in_block) {
        block += line + "\n";
      }
    }
  }
  EXPECT_GE(blocks, 5);
}

// [[objective]], [[intervention]] and [alerting], every key set (docs/objectives.md).
TEST(ConfigTest, ReadsObjectivesInterventionsAndAlerting) {
  TempDir dir;
  std::string path = dir.Write("o.toml", R"toml([budgets]
nlp = "40000.00"
[[objective]]
name = "training-utilization"
kind = "utilization"
scope = "pool:training"
measure = "allocated_efficiency"
target = "65%"
window = "7d"
interval = "5m"
[[objective]]
name = "start-within-10m"
kind = "availability"
scope = "fleet"
target = 0.95
start_within = "10m"
[[objective]]
name = "nlp-budget"
kind = "budget"
scope = "team:nlp"
target = "90%"
[[objective]]
name = "vision-budget"
kind = "budget"
scope = "team:vision"
budget = "1200.50"
[[intervention]]
name = "idle-notebooks"
action = "stop"
mode = "enforce"
objective = "training-utilization"
kind = "notebook"
pool = "dev"
team = "nlp"
idle_below = "5%"
idle_for = "2h"
raise_to = 500
grace = "15m"
exempt = ["user:alice", "job:nb-7", "label:gpuledger.io/exempt=true", "annotation:gpuledger.io/keep"]
max_actions_per_hour = 3
staleness_limit = "5m"
cooldown = "1d"
[alerting]
resend_interval = "2m"
[[alerting.alertmanager]]
url = "http://127.0.0.1:9093"
[[alerting.slack]]
webhook_url = "https://hooks.example.com/T0/B0/x"
name = "platform"
[[alerting.webhook]]
url = "http://127.0.0.1:8080/hook"
[[alerting.route]]
team = "nlp"
slack = "https://hooks.example.com/T0/B1/nlp"
webhook = "http://127.0.0.1:8080/nlp"
name = "nlp-owners"
[[alerting.route]]
user = "alice"
webhook = "http://127.0.0.1:8080/alice"
)toml");
  auto c = Load(path);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->objectives.size(), 4u);
  const ObjectiveSpec& u = c->objectives[0];
  EXPECT_EQ(u.name, "training-utilization");
  EXPECT_EQ(u.kind, ObjectiveKind::kUtilization);
  EXPECT_EQ(u.scope, (ObjectiveScope{ObjectiveScope::Of::kPool, "training"}));
  EXPECT_EQ(u.measure, UtilizationMeasure::kAllocatedEfficiency);
  EXPECT_DOUBLE_EQ(u.target, 0.65);
  EXPECT_EQ(u.window_ms, 7 * kMsPerDay);
  EXPECT_EQ(u.interval_ms, 5 * kMsPerMinute);
  EXPECT_EQ(u.source, path + ":3");
  const ObjectiveSpec& a = c->objectives[1];
  EXPECT_EQ(a.kind, ObjectiveKind::kAvailability);
  EXPECT_EQ(a.scope.of, ObjectiveScope::Of::kFleet);
  EXPECT_DOUBLE_EQ(a.target, 0.95);
  EXPECT_EQ(a.start_within_ms, 10 * kMsPerMinute);
  // A budget objective takes [budgets]' amount unless it names its own; target: 100%.
  EXPECT_EQ(c->objectives[2].monthly_budget, Money::FromUnits(40000));
  EXPECT_DOUBLE_EQ(c->objectives[2].target, 0.9);
  EXPECT_EQ(c->objectives[3].monthly_budget, Money::Parse("1200.50").value());
  EXPECT_DOUBLE_EQ(c->objectives[3].target, 1.0);

  ASSERT_EQ(c->interventions.size(), 1u);
  const InterventionRule& rule = c->interventions[0];
  EXPECT_EQ(rule.action, InterventionAction::kStop);
  EXPECT_TRUE(rule.enforce);
  EXPECT_EQ(rule.objective, "training-utilization");
  EXPECT_EQ(rule.kind, JobKind::kNotebook);
  EXPECT_EQ(rule.pool, "dev");
  EXPECT_EQ(rule.team, "nlp");
  EXPECT_DOUBLE_EQ(rule.idle_below, 0.05);
  EXPECT_EQ(rule.idle_for_ms, 2 * kMsPerHour);
  EXPECT_EQ(rule.raise_to, 500);
  EXPECT_EQ(rule.grace_ms, 15 * kMsPerMinute);
  EXPECT_EQ(rule.exempt, (std::vector<std::string>{"user:alice", "job:nb-7", "label:gpuledger.io/exempt=true",
                                                   "annotation:gpuledger.io/keep"}));
  EXPECT_EQ(rule.max_actions_per_hour, 3);
  EXPECT_EQ(rule.staleness_limit_ms, 5 * kMsPerMinute);
  EXPECT_EQ(rule.cooldown_ms, kMsPerDay);

  EXPECT_EQ(c->alerting.resend_interval_ms, 2 * kMsPerMinute);
  ASSERT_EQ(c->alerting.alertmanagers.size(), 1u);
  EXPECT_EQ(c->alerting.alertmanagers[0].url, "http://127.0.0.1:9093");
  ASSERT_EQ(c->alerting.slack.size(), 1u);
  EXPECT_EQ(c->alerting.slack[0].url, "https://hooks.example.com/T0/B0/x");
  EXPECT_EQ(c->alerting.slack[0].name, "platform");
  ASSERT_EQ(c->alerting.webhooks.size(), 1u);
  ASSERT_EQ(c->alerting.routes.size(), 2u);
  const AlertRouteTable& nlp = c->alerting.routes[0];
  EXPECT_EQ(nlp.team, "nlp");
  EXPECT_EQ(nlp.slack_url, "https://hooks.example.com/T0/B1/nlp");
  EXPECT_EQ(nlp.webhook_url, "http://127.0.0.1:8080/nlp");
  EXPECT_EQ(nlp.name, "nlp-owners");
  EXPECT_EQ(c->alerting.routes[1].user, "alice");
  EXPECT_TRUE(c->alerting.routes[1].slack_url.empty());
  EXPECT_EQ(c->alerting.routes[1].where.Table(), path + ":57: [[alerting.route]]");
}

// A rule is dry-run unless it says enforce; the safety limits have their defaults.
TEST(ConfigTest, AnInterventionIsDryRunByDefault) {
  TempDir dir;
  auto c = Load(dir.Write("d.toml", "[[intervention]]\nname = \"n\"\naction = \"notify\"\n"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->interventions.size(), 1u);
  EXPECT_FALSE(c->interventions[0].enforce);
  EXPECT_EQ(c->interventions[0].grace_ms, 30 * kMsPerMinute);
  EXPECT_EQ(c->interventions[0].cooldown_ms, 6 * kMsPerHour);
  EXPECT_EQ(c->interventions[0].max_actions_per_hour, 10);
}

TEST(ConfigTest, ObjectiveAndInterventionErrorsNameTheLine) {
  using Case = LoadFailure;
  const std::string u = "[[objective]]\nname = \"u\"\nkind = \"utilization\"\n";
  const std::vector<Case> cases = {
      {"[[objective]]\nname = \"u\"\n", ":1: [[objective]]: needs name and kind"},
      {"[[objective]]\nname = \"u\"\nkind = \"speed\"\n", ":3: objective.kind: kind \"speed\": want one of"},
      {u, ":1: [[objective]]: target is required"},
      {u + "target = \"65\"\n", ":4: objective.target: \"65\": want a percentage"},
      {u + "target = \"165%\"\n", ":4: objective.target: \"165%\": a percentage is within 0..100%"},
      {u + "target = 1.5\n", ":4: objective.target: want a percentage"},
      {u + "target = \"100%\"\n", ":4: objective.target: must be above 0% and below 100%"},
      {u + "target = \"65%\"\nscope = \"rack:7\"\n", ":5: objective.scope: scope \"rack:7\": want fleet"},
      {u + "target = \"65%\"\nscope = \"pool:\"\n", ":5: objective.scope: scope \"pool:\": names nothing"},
      {u + "target = \"65%\"\nscope = \"kind:gaming\"\n", ":5: objective.scope: scope \"kind:gaming\": kind"},
      {u + "target = \"65%\"\nmeasure = \"mfu\"\n", ":5: objective.measure: measure \"mfu\": want one of"},
      {u + "target = \"65%\"\nwindow = \"a week\"\n", ":5: objective.window: duration \"a week\""},
      {u + "target = \"65%\"\nwindow = \"1h\"\ninterval = \"2h\"\n", ":6: objective.interval: is longer"},
      {u + "target = \"65%\"\nstart_within = \"10m\"\n", ":5: objective.start_within: only objectives of kind availability"},
      {u + "target = \"65%\"\n" + u + "target = \"60%\"\n",
       ":6: objective.name: \"u\" names the objective at "},
      {"[[objective]]\nname = \"b\"\nkind = \"budget\"\nscope = \"pool:x\"\n",
       ":1: [[objective]]: a budget objective's scope is team:NAME"},
      {"[[objective]]\nname = \"b\"\nkind = \"budget\"\nscope = \"team:x\"\n",
       ":1: [[objective]]: team x has no budget"},
      {"[[objective]]\nname = \"b\"\nkind = \"budget\"\nscope = \"team:x\"\nbudget = 5\n",
       ":5: objective.budget: want a decimal string"},
      {"[[objective]]\nname = \"b\"\nkind = \"budget\"\nscope = \"team:x\"\nbudget = \"0\"\n",
       ":5: objective.budget: a budget must be a positive amount"},
      {"[[intervention]]\nname = \"r\"\n", ":1: [[intervention]]: needs name and action"},
      {"[[intervention]]\nname = \"r\"\naction = \"delete\"\n", ":3: intervention.action: action \"delete\""},
      {"[[intervention]]\nname = \"r\"\naction = \"hold\"\nmode = \"yes\"\n",
       ":4: intervention.mode: mode \"yes\": want dry-run"},
      {"[[intervention]]\nname = \"r\"\naction = \"hold\"\nobjective = \"none\"\n",
       ":4: intervention.objective: no [[objective]] is named \"none\""},
      {"[[intervention]]\nname = \"r\"\naction = \"hold\"\nkind = \"toy\"\n", ":4: intervention.kind: kind \"toy\""},
      {"[[intervention]]\nname = \"r\"\naction = \"hold\"\nidle_below = \"5\"\n", ":4: intervention.idle_below:"},
      {"[[intervention]]\nname = \"r\"\naction = \"hold\"\ngrace = 30\n", ":4: intervention.grace: want a duration"},
      {"[[intervention]]\nname = \"r\"\naction = \"hold\"\nmax_actions_per_hour = 0\n",
       ":4: intervention.max_actions_per_hour: want a positive integer"},
      {"[[intervention]]\nname = \"r\"\naction = \"hold\"\nexempt = [\"tag:x\"]\n",
       ":4: intervention.exempt: \"tag:x\": want team:NAME, project:NAME, user:NAME, job:ID, label:KEY=VALUE, "
       "label:KEY, annotation:KEY=VALUE or annotation:KEY"},
      {"[[intervention]]\nname = \"r\"\naction = \"hold\"\nexempt = [\"label:=true\"]\n",
       ":4: intervention.exempt: \"label:=true\": want team:NAME"},
      {"[[intervention]]\nname = \"r\"\naction = \"hold\"\nexempt = [\"annotation:\"]\n",
       ":4: intervention.exempt: \"annotation:\": want team:NAME"},
      {"[[intervention]]\nname = \"r\"\naction = \"hold\"\n[[intervention]]\nname = \"r\"\naction = \"notify\"\n",
       ":5: intervention.name: \"r\" names the intervention at "},
      {"[[alerting.alertmanager]]\nname = \"am\"\n", ":1: [[alerting.alertmanager]]: url is required"},
      {"[[alerting.slack]]\nwebhook_url = \"hooks.slack.com/x\"\n",
       ":2: alerting.slack.webhook_url: \"hooks.slack.com/x\": want an http:// or https:// URL"},
      {"[alerting]\nresend_interval = \"often\"\n", ":2: alerting.resend_interval: duration \"often\""},
      // An enforced rule that tells the owner first needs a sink to tell them through.
      {"[[intervention]]\nname = \"r\"\naction = \"stop\"\nmode = \"enforce\"\n",
       ":4: intervention.mode: an enforced stop rule tells the job's owner first, and [alerting] has no sink"},
      {"[[intervention]]\nname = \"r\"\naction = \"notify\"\nmode = \"enforce\"\n",
       ":4: intervention.mode: an enforced notify rule tells the job's owner first"},
      {"[[alerting.route]]\nslack = \"https://hooks.slack.com/x\"\n",
       ":1: [[alerting.route]]: needs team = \"NAME\" or user = \"NAME\""},
      {"[[alerting.route]]\nteam = \"nlp\"\nuser = \"ada\"\nslack = \"https://hooks.slack.com/x\"\n",
       ":3: alerting.route.user: a route is a team's or a user's"},
      {"[[alerting.route]]\nteam = \"nlp\"\n", ":1: [[alerting.route]]: needs slack = \"URL\""},
      {"[[alerting.route]]\nteam = \"nlp\"\nwebhook = \"hooks/x\"\n",
       ":3: alerting.route.webhook: \"hooks/x\": want an http:// or https:// URL"},
      {"[[alerting.route]]\nteam = \"nlp\"\nchannel = \"#nlp\"\n", ":3: alerting.route.channel"},
      {"[[alerting.route]]\nteam = \"nlp\"\nslack = \"https://a/\"\n[[alerting.route]]\nteam = \"nlp\"\nwebhook = \"https://b/\"\n",
       ":5: alerting.route.team: team \"nlp\" is routed at "},
  };
  ExpectEachFails(cases);
}

TEST(ConfigTest, ReadsQuotasAndTurnsEachBudgetIntoASoftMonthlyBudget) {
  TempDir dir;
  std::string path = dir.Write("q.toml", R"toml([[quota]]
team = "nlp"
period = "quarter"
mode = "hard"
gpu_hours = 5000
pool = "training"
model = "NVIDIA H200"
budget = "90000.00"
alert_at = ["80%", "100%"]
[[quota]]
project = "llm"
gpu_hours = 300
[budgets]
vision = "12500.50"
)toml");
  auto c = Load(path);
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_EQ(c->quotas.size(), 3u);
  const QuotaSpec& nlp = c->quotas[0];
  EXPECT_EQ(nlp.owner, QuotaSpec::Owner::kTeam);
  EXPECT_EQ(nlp.name, "nlp");
  EXPECT_EQ(nlp.period, QuotaPeriod::kQuarter);
  EXPECT_EQ(nlp.mode, QuotaMode::kHard);
  EXPECT_EQ(nlp.gpu_hours, 5000);
  EXPECT_EQ(nlp.pool, "training");
  EXPECT_EQ(nlp.model, "NVIDIA H200");
  EXPECT_EQ(nlp.budget, Money::Parse("90000").value());
  EXPECT_EQ(nlp.alert_at, (std::vector<double>{0.8, 1.0}));
  EXPECT_EQ(nlp.source, path + ":1");
  const QuotaSpec& llm = c->quotas[1];
  EXPECT_EQ(llm.owner, QuotaSpec::Owner::kProject);
  EXPECT_EQ(llm.period, QuotaPeriod::kMonth);
  EXPECT_EQ(llm.mode, QuotaMode::kSoft);
  EXPECT_FALSE(llm.budget.has_value());
  EXPECT_EQ(llm.alert_at, (std::vector<double>{0.5, 0.8, 1.0}));
  const QuotaSpec& vision = c->quotas[2];
  EXPECT_EQ(vision.name, "vision");
  EXPECT_EQ(vision.period, QuotaPeriod::kMonth);
  EXPECT_EQ(vision.mode, QuotaMode::kSoft);
  EXPECT_FALSE(vision.gpu_hours.has_value());
  EXPECT_EQ(vision.budget, Money::Parse("12500.50").value());
  EXPECT_EQ(vision.source, path + ":14");
  // [budgets] still feeds what displayed it before.
  EXPECT_EQ(c->goals.monthly_budgets.at("vision"), Money::Parse("12500.50").value());
}

TEST(ConfigTest, QuotaErrorsNameTheLine) {
  using Case = LoadFailure;
  const std::string q = "[[quota]]\nteam = \"nlp\"\n";
  const std::vector<Case> cases = {
      {"[[quota]]\ngpu_hours = 10\n", ":1: [[quota]]: needs team = \"NAME\" or project = \"NAME\""},
      {q + "project = \"llm\"\ngpu_hours = 10\n", ":3: quota.project: a quota holds one owner"},
      {q, ":1: [[quota]]: needs gpu_hours (a whole number) or budget"},
      {q + "gpu_hours = 10\nlimit = 3\n", ":4: quota.limit: unknown key (known here: team, project"},
      {q + "gpu_hours = 10\nperiod = \"week\"\n", ":4: quota.period: period \"week\": want month or quarter"},
      {q + "gpu_hours = 10\nmode = \"strict\"\n", ":4: quota.mode: mode \"strict\": want soft"},
      {q + "gpu_hours = 0\n", ":3: quota.gpu_hours: want a positive integer"},
      {q + "gpu_hours = 12.5\n", ":3: quota.gpu_hours: want a positive integer"},
      {q + "budget = 100\n", ":3: quota.budget: want a decimal string"},
      {q + "budget = \"0\"\n", ":3: quota.budget: a budget must be a positive amount"},
      {q + "budget = \"100\"\nmode = \"hard\"\n", ":4: quota.mode: a hard quota needs gpu_hours"},
      {q + "gpu_hours = 10\nalert_at = \"50%\"\n", ":4: quota.alert_at: want a list of percentages"},
      {q + "gpu_hours = 10\nalert_at = [\"50%\", 0.8]\n", ":4: quota.alert_at: want a percentage string"},
      {q + "gpu_hours = 10\nalert_at = [\"80%\", \"50%\"]\n", ":4: quota.alert_at: thresholds go in ascending order"},
      {q + "gpu_hours = 10\nalert_at = [\"0%\"]\n", ":4: quota.alert_at: a threshold must be above 0%"},
      {q + "gpu_hours = 10\n" + q + "gpu_hours = 20\n", ":4: [[quota]]: team:nlp month gpu_hours is set at "},
      {q + "budget = \"10\"\n[budgets]\nnlp = \"20\"\n",
       ":5: budgets.nlp: team nlp's monthly budget is set by the [[quota]] at "},
  };
  ExpectEachFails(cases);
}

}  // namespace
}  // namespace gpuledger::config
