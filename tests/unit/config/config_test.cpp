// Config system: the field table against the structs, text parsing, the TOML round trip, CLI
// flag forms, precedence (function < TOML file < CLI flags), error messages with suggestions,
// the registry and validate(). Expected values are written out here, never read back from the code
// under test.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "titan/config/overrides.h"
#include "titan/config/registry.h"
#include "titan/models/builtin.h"
#include "titan/models/qwen3/configs.h"
#include "titan/config/validate.h"


// The model families' config functions, registered as the titan binary's main() does, for every
// test of this executable (gtest's global environment runs before each test process's tests).
class RegisterConfigFunctions : public ::testing::Environment {
 public:
  void SetUp() override { titan::models::register_config_functions(); }
};
[[maybe_unused]] static ::testing::Environment* const kRegisterConfigFunctions =
    ::testing::AddGlobalTestEnvironment(new RegisterConfigFunctions);

namespace titan::config {

// GoogleTest prints a JobConfig that differs as its TOML, not as bytes (found by ADL).
void PrintTo(const JobConfig& config, std::ostream* os) { *os << "\n" << to_toml(config); }

namespace {

using namespace titan::qwen3;  // the Qwen3 config functions under test

namespace fs = std::filesystem;

// The message of the ConfigError that `fn` throws ("" and a test failure when it throws nothing).
std::string config_error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a ConfigError";
  return "";
}

class TempDir {
 public:
  TempDir() : path_(fs::temp_directory_path() / ("titan_config_test_" + std::to_string(::getpid()))) {
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string write(const std::string& name, const std::string& text) const {
    const fs::path file = path_ / name;
    std::ofstream(file, std::ios::binary) << text;
    return file.string();
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

size_t count_in_section(const std::string& section) {
  size_t n = 0;
  for (const Field& f : job_config_fields()) n += f.path.starts_with(section + ".");
  return n;
}

// Sets every field to a value different from its default, by type.
JobConfig all_non_default() {
  JobConfig c;
  int i = 0;
  for (const Field& f : job_config_fields()) {
    ++i;
    switch (f.type) {
      case FieldType::boolean: set_field(c, f.path, f.default_value == "true" ? "false" : "true"); break;
      case FieldType::integer: set_field(c, f.path, std::to_string(1000003 * i + 7)); break;
      case FieldType::number: set_field(c, f.path, std::to_string(i) + ".123456789012345e-3"); break;
      case FieldType::string: {
        std::string text = "v";  // appended piecewise: GCC 12 misreports a chain of + (-Wrestrict)
        text += std::to_string(i);
        text += " \"q\" \\ \t\n\x01 é ✓ =";
        set_field(c, f.path, text);
        break;
      }
    }
  }
  return c;
}

// ---- the field table ------------------------------------------------------------------------

TEST(JobConfigFields, TableCoversEveryStructMember) {
  // Structured bindings fail to compile when a member is added or removed, so a new field forces
  // this test (and, through the counts, the field table) to be updated.
  const JobConfig c;
  [[maybe_unused]] const auto& [j1, j2, j3] = c.job;
  [[maybe_unused]] const auto& [m1, m2, m3, m4, m5, m6, m7, m8, m9] = c.model;
  [[maybe_unused]] const auto& [t1, t2, t3, t4, t5, t6, t7, t8, t9, t10, t11, t12, t13, t14, t15, t16, t17, t18, t19] =
      c.training;
  [[maybe_unused]] const auto& [o1, o2, o3, o4, o5, o6, o7, o8, o9, o10, o11, o12] = c.optimizer;
  [[maybe_unused]] const auto& [l1, l2, l3, l4] = c.lr_scheduler;
  [[maybe_unused]] const auto& [x1, x2, x3, x4, x5] = c.metrics;
  [[maybe_unused]] const auto& [v1, v2, v3, v4, v5, v6] = c.validation;
  [[maybe_unused]] const auto& [k1, k2, k3, k4, k5, k6, k7, k8, k9, k10, k11, k12, k13, k14, k15, k16] = c.checkpoint;
  [[maybe_unused]] const auto& [p1, p2, p3, p4, p5, p6, p7, p8, p9, p10, p11] = c.parallelism;
  [[maybe_unused]] const auto& [a1, a2] = c.activation_checkpoint;
  [[maybe_unused]] const auto& [ov1] = c.overrides;
  [[maybe_unused]] const auto& [r1, r2, r3, r4, r5, r6, r7, r8] = c.lora;
  [[maybe_unused]] const auto& [c1] = c.comm;
  [[maybe_unused]] const auto& [s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, s12, s13] = c;
  EXPECT_EQ(count_in_section("job"), 3u);
  EXPECT_EQ(count_in_section("model"), 9u);
  EXPECT_EQ(count_in_section("training"), 19u);
  EXPECT_EQ(count_in_section("optimizer"), 12u);
  EXPECT_EQ(count_in_section("lr_scheduler"), 4u);
  EXPECT_EQ(count_in_section("metrics"), 5u);
  EXPECT_EQ(count_in_section("validation"), 6u);
  EXPECT_EQ(count_in_section("checkpoint"), 16u);
  EXPECT_EQ(count_in_section("parallelism"), 11u);
  EXPECT_EQ(count_in_section("activation_checkpoint"), 2u);
  EXPECT_EQ(count_in_section("override"), 1u);
  EXPECT_EQ(count_in_section("lora"), 8u);
  EXPECT_EQ(count_in_section("comm"), 1u);
  EXPECT_EQ(job_config_fields().size(), 97u);

  // Every field reaches a distinct member: setting all of them changes every section.
  const JobConfig changed = all_non_default();
  EXPECT_NE(changed.job, c.job);
  EXPECT_NE(changed.parallelism, c.parallelism);
  EXPECT_NE(changed.overrides, c.overrides);
  EXPECT_NE(changed.lora, c.lora);
  EXPECT_NE(changed.comm, c.comm);
  for (const Field& f : job_config_fields()) {
    EXPECT_NE(get_field(changed, f.path), f.default_value) << f.path;
  }
  std::set<std::string> paths;
  for (const Field& f : job_config_fields()) {
    EXPECT_TRUE(paths.insert(f.path).second) << "duplicate " << f.path;
    EXPECT_FALSE(f.help.empty()) << f.path;
    EXPECT_EQ(f.help.find('\n'), std::string::npos) << f.path;
  }
}

TEST(JobConfigFields, SectionOrderAndTypes) {
  const auto& fields = job_config_fields();
  EXPECT_EQ(fields.front().path, "job.dump_folder");
  EXPECT_EQ(fields.back().path, "comm.timeout_seconds");
  const std::vector<std::string> order = {"job", "model", "training", "optimizer", "lr_scheduler", "metrics",
                                          "validation", "checkpoint", "parallelism", "activation_checkpoint", "override",
                                          "lora", "comm"};
  std::vector<std::string> seen;
  for (const Field& f : fields) {
    const std::string section = f.path.substr(0, f.path.find('.'));
    if (seen.empty() || seen.back() != section) seen.push_back(section);
  }
  EXPECT_EQ(seen, order);
  EXPECT_EQ(find_field("training.steps")->type, FieldType::integer);
  EXPECT_EQ(find_field("optimizer.lr")->type, FieldType::number);
  EXPECT_EQ(find_field("training.deterministic")->type, FieldType::boolean);
  EXPECT_EQ(find_field("training.mixed_precision_param")->type, FieldType::string);
  EXPECT_EQ(find_field("training.dtype"), nullptr);
  EXPECT_EQ(find_field("training.step"), nullptr);
}

TEST(JobConfigFields, DefaultsEqualADefaultJobConfig) {
  // Written-out defaults from the interface, as the table reports them.
  EXPECT_EQ(find_field("job.dump_folder")->default_value, "./outputs");
  EXPECT_EQ(find_field("training.steps")->default_value, "1000");
  EXPECT_EQ(find_field("training.global_batch_size")->default_value, "-1");
  EXPECT_EQ(find_field("training.deterministic")->default_value, "false");
  EXPECT_EQ(find_field("metrics.enable_jsonl")->default_value, "true");
  EXPECT_EQ(std::stod(find_field("optimizer.lr")->default_value), 8e-4);
  EXPECT_EQ(std::stod(find_field("optimizer.eps")->default_value), 1e-8);
  EXPECT_EQ(std::stod(find_field("lr_scheduler.decay_ratio")->default_value), -1.0);
  EXPECT_EQ(find_field("job.config_file")->default_value, "");

  // Applying every listed default to a fully changed config gives back JobConfig{}.
  JobConfig c = all_non_default();
  ASSERT_NE(c, JobConfig{});
  for (const Field& f : job_config_fields()) set_field(c, f.path, f.default_value);
  EXPECT_EQ(c, JobConfig{});
}

// ---- text values ----------------------------------------------------------------------------

TEST(SetField, ParsesEachType) {
  JobConfig c;
  for (const auto& [text, want] : std::vector<std::pair<std::string, int64_t>>{
           {"10", 10}, {"-1", -1}, {"+3", 3}, {"0", 0}, {"9223372036854775807", std::numeric_limits<int64_t>::max()}}) {
    set_field(c, "training.steps", text);
    EXPECT_EQ(c.training.steps, want) << text;
  }
  for (const auto& [text, want] : std::vector<std::pair<std::string, double>>{
           {"8e-4", 8e-4}, {"1", 1.0}, {".5", 0.5}, {"-2.5E3", -2500.0}, {"+0.25", 0.25}, {"3.", 3.0}}) {
    set_field(c, "optimizer.lr", text);
    EXPECT_EQ(c.optimizer.lr, want) << text;
  }
  for (const auto& [text, want] : std::vector<std::pair<std::string, bool>>{
           {"true", true}, {"false", false}, {"1", true}, {"0", false}, {"yes", true}, {"no", false}, {"TRUE", true},
           {"No", false}}) {
    set_field(c, "checkpoint.enable", text);
    EXPECT_EQ(c.checkpoint.enable, want) << text;
  }
  set_field(c, "job.description", "  spaces, = and \"quotes\" kept  ");
  EXPECT_EQ(c.job.description, "  spaces, = and \"quotes\" kept  ");
  set_field(c, "job.description", "");
  EXPECT_EQ(c.job.description, "");
}

TEST(SetField, RejectsBadValuesNamingTheField) {
  JobConfig c;
  EXPECT_EQ(config_error_of([&] { set_field(c, "training.steps", "abc"); }).rfind("training.steps: 'abc' is not an integer", 0), 0u);
  for (const char* bad : {"", "1.5", "1e3", "10abc", " 10", "+-3", "0x10"}) {
    EXPECT_NE(config_error_of([&] { set_field(c, "training.steps", bad); }).find("is not an integer"), std::string::npos) << bad;
  }
  for (const char* big : {"99999999999999999999", "-9223372036854775809"}) {
    EXPECT_NE(config_error_of([&] { set_field(c, "training.steps", big); }).find("is out of range for a 64-bit integer"),
              std::string::npos) << big;
  }
  EXPECT_NE(config_error_of([&] { set_field(c, "optimizer.lr", "1e999"); }).find("is out of range for a double"),
            std::string::npos);
  for (const char* bad : {"nan", "inf", "-inf"}) {
    EXPECT_NE(config_error_of([&] { set_field(c, "optimizer.lr", bad); }).find("is not a finite number"), std::string::npos)
        << bad;
  }
  for (const char* bad : {"", "abc", "1.2.3", "8e", "--1", "1,5"}) {
    EXPECT_NE(config_error_of([&] { set_field(c, "optimizer.lr", bad); }).find("optimizer.lr: '"), std::string::npos) << bad;
  }
  for (const char* bad : {"", "2", "maybe", "on", "truee"}) {
    EXPECT_NE(config_error_of([&] { set_field(c, "checkpoint.enable", bad); }).find("is not a boolean"), std::string::npos) << bad;
  }
  EXPECT_EQ(c, JobConfig{});  // failed sets change nothing
}

TEST(SetField, UnknownPathSuggestsNearest) {
  JobConfig c;
  const std::string message = config_error_of([&] { set_field(c, "training.step", "1"); });
  EXPECT_EQ(message, "unknown config field 'training.step'; did you mean training.steps?");
  EXPECT_NE(config_error_of([&] { (void)get_field(c, "optimizer.lrr"); }).find("did you mean optimizer.lr?"), std::string::npos);
}

TEST(NearestField, EditDistanceAndLastComponent) {
  EXPECT_EQ(nearest_field("training.step"), "training.steps");
  EXPECT_EQ(nearest_field("training.stesp"), "training.steps");
  EXPECT_EQ(nearest_field("steps"), "training.steps");
  EXPECT_EQ(nearest_field("train.lr"), "optimizer.lr");
  EXPECT_EQ(nearest_field("lr"), "optimizer.lr");
  EXPECT_EQ(nearest_field("lr_schedular.warmup_steps"), "lr_scheduler.warmup_steps");
  EXPECT_EQ(nearest_field("local_batch"), "training.local_batch_size");
  EXPECT_EQ(nearest_field("metrics.log_frequency"), "metrics.log_freq");
  EXPECT_EQ(nearest_field("checkpoint.enabled"), "checkpoint.enable");
  EXPECT_EQ(nearest_field("qqqqqqqqqqqqqq"), "");
  EXPECT_EQ(nearest_field("help"), "");
}

// ---- TOML -----------------------------------------------------------------------------------

TEST(Toml, EveryFieldRoundTrips) {
  const JobConfig c = all_non_default();
  const std::string text = to_toml(c);
  JobConfig back;
  apply_toml_text(back, text, "roundtrip.toml");
  EXPECT_EQ(back, c);
  for (const Field& f : job_config_fields()) EXPECT_EQ(get_field(back, f.path), get_field(c, f.path)) << f.path;
  // And the defaults (empty strings, -1, 1.0 that must stay a float in TOML).
  JobConfig defaults = all_non_default();
  apply_toml_text(defaults, to_toml(JobConfig{}), "defaults.toml");
  EXPECT_EQ(defaults, JobConfig{});
}

TEST(Toml, DoublesRoundTripBitExactly) {
  for (const double value : {1.0, 0.1 + 0.2, 8e-4, 1e-300, 5e-324, 1e300, -0.0, 123456789.125, 2.0 / 3.0, -1.0,
                             std::numeric_limits<double>::max()}) {
    JobConfig c;
    c.optimizer.lr = value;
    JobConfig back;
    apply_toml_text(back, to_toml(c), "doubles.toml");
    EXPECT_EQ(back.optimizer.lr, value) << get_field(c, "optimizer.lr");
    EXPECT_EQ(std::signbit(back.optimizer.lr), std::signbit(value));
  }
}

TEST(Toml, LayoutHasSectionsAndHelpComments) {
  const std::string text = to_toml(JobConfig{});
  EXPECT_NE(text.find("\n[training]\n"), std::string::npos);
  EXPECT_NE(text.find("\n[parallelism]\n"), std::string::npos);
  EXPECT_NE(text.find("# optimizer steps to run\nsteps = 1000\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nmax_norm = 1.0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\ndump_folder = \"./outputs\"\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nenable_jsonl = true\n"), std::string::npos) << text;
  // Every key line is preceded by its help line.
  for (const Field& f : job_config_fields()) {
    const std::string key = f.path.substr(f.path.find('.') + 1);
    EXPECT_NE(text.find("# " + f.help + "\n" + key + " = "), std::string::npos) << f.path;
  }
}

TEST(Toml, AppliesOnlyWhatItNames) {
  JobConfig c;
  apply_toml_text(c, "[training]\nsteps = 42\nseq_len = 128 # inline comment\n\n[optimizer]\nlr = 1\nname = 'AdamW'\n", "t.toml");
  EXPECT_EQ(c.training.steps, 42);
  EXPECT_EQ(c.training.seq_len, 128);
  EXPECT_EQ(c.optimizer.lr, 1.0);  // an integer is accepted for a number
  EXPECT_EQ(c.training.local_batch_size, 8);
  apply_toml_text(c, "", "empty.toml");
  EXPECT_EQ(c.training.steps, 42);
}

TEST(Toml, ErrorsNameFileLineAndFix) {
  JobConfig c;
  EXPECT_NE(config_error_of([&] { apply_toml_text(c, "[training]\nsteps = 1\nsteps = = 2\n", "bad.toml"); })
                .find("bad.toml:3:"),
            std::string::npos);
  std::string m = config_error_of([&] { apply_toml_text(c, "[training]\nsteps = 1\n\n[traning]\nseed = 1\n", "s.toml"); });
  EXPECT_EQ(m, "s.toml:4: unknown section [traning]; did you mean [training]?");
  EXPECT_EQ(config_error_of([&] { apply_toml_text(c, "[foo]\nx = 1\n", "u.toml"); }), "u.toml:1: unknown section [foo]");
  m = config_error_of([&] { apply_toml_text(c, "[training]\nstep = 1\n", "k.toml"); });
  EXPECT_EQ(m, "k.toml:2: unknown config field 'training.step'; did you mean training.steps?");
  m = config_error_of([&] { apply_toml_text(c, "steps = 1\n", "o.toml"); });
  EXPECT_NE(m.find("o.toml:1: 'steps' is outside any [section]; did you mean steps under [training]?"), std::string::npos) << m;
  m = config_error_of([&] { apply_toml_text(c, "[training]\n\nsteps = \"10\"\n", "q.toml"); });
  EXPECT_EQ(m, "q.toml:3: training.steps: expected an integer, got a string; write it without quotes");
  m = config_error_of([&] { apply_toml_text(c, "[training]\nsteps = 10.0\n", "f.toml"); });
  EXPECT_EQ(m, "f.toml:2: training.steps: expected an integer, got a floating-point number; e.g. steps = 1000");
  m = config_error_of([&] { apply_toml_text(c, "[checkpoint]\nenable = 1\n", "b.toml"); });
  EXPECT_NE(m.find("checkpoint.enable: expected a boolean"), std::string::npos) << m;
  m = config_error_of([&] { apply_toml_text(c, "[job]\ndump_folder = 3\n", "str.toml"); });
  EXPECT_NE(m.find("job.dump_folder: expected a string (in quotes), got an integer"), std::string::npos) << m;
  m = config_error_of([&] { apply_toml_text(c, "training = 3\n", "sec.toml"); });
  EXPECT_NE(m.find("'training' must be a [training] section"), std::string::npos) << m;
  EXPECT_EQ(c, JobConfig{});

  const std::string missing = "/nonexistent/titan/job.toml";
  m = config_error_of([&] { apply_toml_file(c, missing); });
  EXPECT_NE(m.find("'" + missing + "' does not exist"), std::string::npos) << m;
  TempDir dir;
  const std::string a = dir.write("a.toml", ""), b = dir.write("b.toml", "");
  fs::remove(a);
  fs::remove(b);
  fs::create_symlink("b.toml", a);
  fs::create_symlink("a.toml", b);
  m = config_error_of([&] { apply_toml_file(c, a); });
  EXPECT_NE(m.find("a.toml' is a symbolic link loop"), std::string::npos) << m;
}

TEST(Toml, FileRoundTrip) {
  TempDir dir;
  JobConfig c = qwen3_debug();
  c.training.steps = 77;
  const std::string path = dir.write("run.toml", to_toml(c));
  JobConfig back;
  apply_toml_file(back, path);
  EXPECT_EQ(back, c);
}

// ---- CLI ------------------------------------------------------------------------------------

TEST(Cli, AllFlagForms) {
  const JobConfig c = apply_cli_overrides(JobConfig{}, {
      "--training.steps", "10",                 // space
      "--training.seq_len=64",                  // =
      "--training.global_batch_size", "-1",     // a negative value is a value, not a flag
      "--checkpoint.enable",                    // bare boolean
      "--no-metrics.enable_jsonl",              // negated boolean
      "--training.deterministic=yes",           // boolean with =
      "--job.description=a=b --c",              // '=' and dashes inside an = value
      "--optimizer.lr", "3e-3",
      "--job.dump_folder=",                     // empty string
  });
  EXPECT_EQ(c.training.steps, 10);
  EXPECT_EQ(c.training.seq_len, 64);
  EXPECT_EQ(c.training.global_batch_size, -1);
  EXPECT_TRUE(c.checkpoint.enable);
  EXPECT_FALSE(c.metrics.enable_jsonl);
  EXPECT_TRUE(c.training.deterministic);
  EXPECT_EQ(c.job.description, "a=b --c");
  EXPECT_EQ(c.optimizer.lr, 3e-3);
  EXPECT_EQ(c.job.dump_folder, "");

  const JobConfig later = apply_cli_overrides(JobConfig{}, {"--training.steps=1", "--training.steps", "2",
                                                            "--checkpoint.enable", "--checkpoint.enable=false"});
  EXPECT_EQ(later.training.steps, 2);
  EXPECT_FALSE(later.checkpoint.enable);
}

TEST(Cli, Errors) {
  const auto apply = [](std::vector<std::string> args) {
    return config_error_of([&] { (void)apply_cli_overrides(JobConfig{}, args); });
  };
  EXPECT_EQ(apply({"--training.step", "10"}),
            "unknown config field '--training.step'; did you mean --training.steps? (titan train --help lists all)");
  EXPECT_EQ(apply({"--training.dtype", "bfloat16"}),
            "config field '--training.dtype' was replaced by --training.mixed_precision_param (float32 | bfloat16, "
            "torchtitan's name)");
  EXPECT_EQ(apply({"--training.steps"}), "--training.steps: missing value; use --training.steps VALUE or --training.steps=VALUE");
  EXPECT_NE(apply({"--training.steps", "--training.seq_len=4"}).find("missing value"), std::string::npos);
  EXPECT_NE(apply({"--no-training.steps"}).find("--no- negates boolean fields only"), std::string::npos);
  EXPECT_NE(apply({"--no-checkpoint.enable=true"}).find("takes no value"), std::string::npos);
  EXPECT_NE(apply({"--no-checkpoint.enabel"}).find("did you mean --no-checkpoint.enable?"), std::string::npos);
  EXPECT_EQ(apply({"--training.steps", "abc"}).rfind("training.steps: 'abc' is not an integer", 0), 0u);
  EXPECT_NE(apply({"stray"}).find("unexpected argument 'stray'"), std::string::npos);
  // A bare boolean never swallows the next argument; "false" there would otherwise read as true.
  EXPECT_EQ(apply({"--checkpoint.enable", "false"}),
            "unexpected argument 'false' after --checkpoint.enable; boolean flags take no separate value: use "
            "--checkpoint.enable=false or --no-checkpoint.enable");
  EXPECT_NE(apply({"--config", "qwen3_debug"}).find("unknown config field '--config'"), std::string::npos);
}

// ---- resolve: function < TOML file < CLI --------------------------------------------------

TEST(Resolve, PrecedenceFunctionThenFileThenFlags) {
  TempDir dir;
  const std::string file = dir.write("over.toml",
                                     "[training]\nsteps = 50\n\n[optimizer]\nlr = 0.01\n\n[metrics]\nlog_freq = 3\n"
                                     "[job]\nconfig_file = \"over.toml\"\n");  // itself, as --print-config writes it
  // The CLI flag comes BEFORE --job.config_file and still wins over the file.
  const ResolveResult r = resolve_config({"--training.steps", "7", "--config", "qwen3_debug", "--job.config_file", file,
                                          "--metrics.log_freq=5"});
  EXPECT_EQ(r.config_name, "qwen3_debug");
  EXPECT_FALSE(r.print_config);
  EXPECT_TRUE(r.unknown_positional.empty());
  EXPECT_EQ(r.config.training.steps, 7);       // CLI over TOML
  EXPECT_EQ(r.config.optimizer.lr, 0.01);      // TOML over function (3e-3)
  EXPECT_EQ(r.config.metrics.log_freq, 5);     // CLI after the file
  EXPECT_EQ(r.config.training.seq_len, 256);   // function over base (2048)
  EXPECT_EQ(r.config.model.hf_assets_path, "./outputs/quickstart_tokenizer");
  EXPECT_EQ(r.config.job.config_file, file);   // the file read
  // A job file naming another job file would silently not read it: an error.
  const std::string nested = dir.write("nested.toml", "[job]\nconfig_file = \"elsewhere.toml\"\n");
  EXPECT_NE(config_error_of([&] { (void)resolve_config({"--config", "qwen3_debug", "--job.config_file", nested}); })
                .find("names another job file, which would not be read"),
            std::string::npos);

  // Without the file: function, then flags.
  const ResolveResult plain = resolve_config({"--config=qwen3_0_6b", "--print-config", "extra", "--training.seed", "5"});
  EXPECT_EQ(plain.config_name, "qwen3_0_6b");
  EXPECT_TRUE(plain.print_config);
  EXPECT_EQ(plain.unknown_positional, std::vector<std::string>{"extra"});
  EXPECT_EQ(plain.config.training.seed, 5);
  EXPECT_EQ(plain.config.model.name, "0.6B");
}

TEST(Resolve, Errors) {
  EXPECT_EQ(config_error_of([] { (void)resolve_config({"--training.steps", "3"}); }),
            "titan train: --config NAME is required; use one of finetune, qwen3_debug, qwen3_0_6b, qwen3_1_7b, qwen3_4b, "
            "qwen3_8b, qwen3_14b, qwen3_32b, qwen3_30b_a3b_reduced, qwen3_4b_finetune, qwen3_4b_lora, qwen3_debug_finetune, "
            "qwen3_5_debug");
  EXPECT_NE(config_error_of([] { (void)resolve_config({"--config", "qwen3_debg"}); }).find("unknown config function 'qwen3_debg'"),
            std::string::npos);
  EXPECT_NE(config_error_of([] { (void)resolve_config({"--config"}); }).find("--config: missing value"), std::string::npos);
  EXPECT_NE(config_error_of([] { (void)resolve_config({"--config", "qwen3_debug", "--job.config_file", "/nonexistent/x.toml"}); })
                .find("does not exist"),
            std::string::npos);
}

// ---- registry -------------------------------------------------------------------------------

TEST(Registry, NamesAndLookup) {
  std::vector<std::string> names;
  for (const ConfigEntry& e : config_registry()) {
    names.push_back(e.name);
    EXPECT_FALSE(e.summary.empty()) << e.name;
    EXPECT_EQ(&find_config(e.name), &e);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"finetune", "qwen3_debug", "qwen3_0_6b", "qwen3_1_7b", "qwen3_4b", "qwen3_8b",
                                             "qwen3_14b", "qwen3_32b", "qwen3_30b_a3b_reduced", "qwen3_4b_finetune",
                                             "qwen3_4b_lora", "qwen3_debug_finetune", "qwen3_5_debug"}));
  EXPECT_EQ(config_error_of([] { (void)find_config("llama"); }),
            "--config: unknown config function 'llama'; use one of finetune, qwen3_debug, qwen3_0_6b, qwen3_1_7b, qwen3_4b, "
            "qwen3_8b, qwen3_14b, qwen3_32b, qwen3_30b_a3b_reduced, qwen3_4b_finetune, qwen3_4b_lora, qwen3_debug_finetune, "
            "qwen3_5_debug");
  EXPECT_EQ(base_config(), JobConfig{});
}

TEST(Registry, EveryFunctionValidates) {
  for (const ConfigEntry& e : config_registry()) {
    const JobConfig c = e.fn();
    EXPECT_NO_THROW(validate(c, 1)) << e.name;
    EXPECT_NO_THROW(validate(c, 8)) << e.name;
    EXPECT_NE(c, JobConfig{}) << e.name;
  }
  const std::vector<std::pair<ConfigFn, std::string>> sizes = {{&qwen3_0_6b, "0.6B"}, {&qwen3_1_7b, "1.7B"},
                                                               {&qwen3_4b, "4B"},     {&qwen3_8b, "8B"},
                                                               {&qwen3_14b, "14B"},   {&qwen3_32b, "32B"}};
  for (const auto& [fn, size] : sizes) {
    const JobConfig c = fn();
    EXPECT_EQ(c.model.name, size);
    EXPECT_EQ(c.model.hf_assets_path, "./assets/hf/Qwen3-" + size);
    EXPECT_EQ(c.training.seq_len, 4096);
    EXPECT_EQ(c.training.steps, 10000);
  }
  // The seed's MoE run: Qwen3-30B-A3B cut to 4 layers of 64 experts, top-4.
  const JobConfig moe = qwen3_30b_a3b_reduced();
  EXPECT_EQ(moe.model.name, "30B-A3B");
  EXPECT_EQ(moe.model.hf_assets_path, "./assets/hf/Qwen3-30B-A3B");
  EXPECT_EQ(moe.model.n_layers, 4);
  EXPECT_EQ(moe.model.num_experts, 64);
  EXPECT_EQ(moe.model.top_k, 4);
  // The fine-tuning pair: HF import, checkpoints, HF export; the twin reads a tiny HF folder.
  for (const JobConfig& c : {qwen3_4b_finetune(), qwen3_debug_finetune()}) {
    EXPECT_TRUE(c.checkpoint.enable);
    EXPECT_TRUE(c.checkpoint.initial_load_in_hf);
    EXPECT_TRUE(c.checkpoint.last_save_in_hf);
    EXPECT_FALSE(c.checkpoint.initial_load_path.empty());
  }
  EXPECT_EQ(qwen3_4b_finetune().model.name, "4B");
  EXPECT_EQ(qwen3_4b_finetune().checkpoint.initial_load_path, "./assets/hf/Qwen3-4B");
  EXPECT_EQ(qwen3_4b_finetune().optimizer.lr, 2e-5);
  EXPECT_EQ(qwen3_debug_finetune().model.name, "");  // built from the HF folder's config.json
  EXPECT_EQ(qwen3_debug_finetune().model.hf_assets_path, qwen3_debug_finetune().checkpoint.initial_load_path);
}

// The quickstart needs nothing outside the binary: the built-in corpus, the tokenizer folder that
// scripts/run.sh trains into, the debug spec, and a reproducible run.
TEST(Registry, QuickstartIsSelfContained) {
  const JobConfig c = find_config("qwen3_debug").fn();
  EXPECT_EQ(c.model.name, "debug");
  EXPECT_EQ(c.training.dataset, "quickstart");
  EXPECT_EQ(c.training.dataset_path, "");
  EXPECT_EQ(c.model.hf_assets_path, "./outputs/quickstart_tokenizer");
  EXPECT_TRUE(c.training.deterministic);
  EXPECT_LT(c.lr_scheduler.warmup_steps, c.training.steps);
}

// ---- validate -------------------------------------------------------------------------------

TEST(Validate, DefaultsPassAndEdgesAreAllowed) {
  EXPECT_NO_THROW(validate(JobConfig{}, 1));
  JobConfig c;
  c.training.max_norm = 0;  // disables clipping
  c.training.seq_len = 2;
  c.optimizer.beta1 = 0;
  c.optimizer.weight_decay = 0;
  c.optimizer.name = "adamw";
  c.lr_scheduler.warmup_steps = 0;
  c.lr_scheduler.decay_ratio = 1;
  c.lr_scheduler.decay_type = "sqrt";
  c.lr_scheduler.min_lr_factor = 1;
  c.training.dataset = "not-built-in";
  c.training.dataset_path = "/data/c4";  // a path makes the dataset name irrelevant
  c.training.global_batch_size = 32;
  EXPECT_NO_THROW(validate(c, 2));
}

TEST(Validate, EachImpossibleValueIsOneClearError) {
  struct Case {
    std::function<void(JobConfig&)> mutate;
    std::string message_start;
  };
  const std::vector<Case> cases = {
      {[](JobConfig& c) { c.training.steps = 0; }, "training.steps=0 must be >= 1"},
      {[](JobConfig& c) { c.training.local_batch_size = 0; }, "training.local_batch_size=0 must be >= 1"},
      {[](JobConfig& c) { c.training.seq_len = 1; }, "training.seq_len=1 must be >= 2"},
      {[](JobConfig& c) { c.training.global_batch_size = 0; }, "training.global_batch_size=0 must be -1"},
      {[](JobConfig& c) { c.training.mixed_precision_param = "fp16"; },
       "training.mixed_precision_param='fp16' is not float32 or bfloat16"},
      {[](JobConfig& c) { c.training.mixed_precision_reduce = "bf16"; },
       "training.mixed_precision_reduce='bf16' is not float32 or bfloat16"},
      {[](JobConfig& c) { c.training.dataset = "c4"; }, "training.dataset='c4' is not a built-in dataset"},
      {[](JobConfig& c) { c.optimizer.name = "SGD"; }, "optimizer.name='SGD' is not supported; use AdamW"},
      {[](JobConfig& c) { c.optimizer.lr = 0; }, "optimizer.lr=0 must be"},
      {[](JobConfig& c) { c.optimizer.lr = std::nan(""); }, "optimizer.lr=nan must be"},
      {[](JobConfig& c) { c.optimizer.beta1 = 1; }, "optimizer.beta1=1 must be in [0, 1)"},
      {[](JobConfig& c) { c.optimizer.beta2 = -0.1; }, "optimizer.beta2=-0.1 must be in [0, 1)"},
      {[](JobConfig& c) { c.optimizer.eps = 0; }, "optimizer.eps=0 must be"},
      {[](JobConfig& c) { c.optimizer.weight_decay = -1; }, "optimizer.weight_decay=-1 must be >= 0"},
      {[](JobConfig& c) { c.optimizer.state_dtype = "float16"; }, "optimizer.state_dtype='float16' is not float32 or bfloat16"},
      {[](JobConfig& c) { c.lr_scheduler.warmup_steps = -1; }, "lr_scheduler.warmup_steps=-1 must be >= 0"},
      {[](JobConfig& c) { c.lr_scheduler.decay_ratio = 1.5; }, "lr_scheduler.decay_ratio=1.5 must be in [0, 1]"},
      {[](JobConfig& c) { c.lr_scheduler.decay_ratio = -0.5; }, "lr_scheduler.decay_ratio=-0.5 must be in [0, 1]"},
      {[](JobConfig& c) { c.lr_scheduler.decay_type = "step"; }, "lr_scheduler.decay_type='step' is unknown"},
      {[](JobConfig& c) { c.lr_scheduler.min_lr_factor = 2; }, "lr_scheduler.min_lr_factor=2 must be in [0, 1]"},
      {[](JobConfig& c) { c.metrics.log_freq = 0; }, "metrics.log_freq=0 must be >= 1"},
      {[](JobConfig& c) { c.metrics.peak_tflops = -1; }, "metrics.peak_tflops=-1 must be >= 0"},
      {[](JobConfig& c) { c.model.n_layers = -2; }, "model.n_layers=-2 must be >= 0"},
      {[](JobConfig& c) { c.model.name = ""; }, "model.name and model.hf_assets_path are both empty"},
      {[](JobConfig& c) { c.validation.enable = true; }, "validation.enable is set but validation.dataset_path is empty"},
      {[](JobConfig& c) { c.validation.freq = 0; }, "validation.freq=0 must be >= 1"},
      {[](JobConfig& c) { c.validation.steps = 0; }, "validation.steps=0 must be >= 1 batches, or -1"},
      {[](JobConfig& c) { c.validation.local_batch_size = -1; }, "validation.local_batch_size=-1 must be >= 1"},
      {[](JobConfig& c) { c.validation.seq_len = 1; }, "validation.seq_len=1 must be >= 2"},
      {[](JobConfig& c) { c.checkpoint.interval = 0; }, "checkpoint.interval=0 must be >= 1"},
      {[](JobConfig& c) { c.checkpoint.keep_latest_k = -1; }, "checkpoint.keep_latest_k=-1 must be >= 0"},
      {[](JobConfig& c) { c.checkpoint.export_dtype = "fp8"; }, "checkpoint.export_dtype='fp8' is not float32"},
      {[](JobConfig& c) { c.checkpoint.async_mode = "threads"; }, "checkpoint.async_mode='threads' is not"},
      {[](JobConfig& c) { c.checkpoint.load_step = -2; }, "checkpoint.load_step=-2 must be >= 0"},
      {[](JobConfig& c) { c.checkpoint.initial_load_in_hf = true; }, "checkpoint.initial_load_in_hf is set but"},
      {[](JobConfig& c) { c.checkpoint.max_shard_size = "5 parsecs"; }, "checkpoint.max_shard_size='5 parsecs'"},
      {[](JobConfig& c) { c.parallelism.data_parallel_shard_degree = 0; }, "parallelism.data_parallel_shard_degree=0"},
      {[](JobConfig& c) { c.parallelism.tensor_parallel_degree = 0; }, "parallelism.tensor_parallel_degree=0"},
  };
  for (const Case& k : cases) {
    JobConfig c;
    k.mutate(c);
    const std::string message = config_error_of([&] { validate(c, 1); });
    EXPECT_EQ(message.rfind(k.message_start, 0), 0u) << "got: " << message << "\nwant start: " << k.message_start;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST(Validate, ByteSizes) {
  EXPECT_EQ(parse_byte_size("5GB"), 5'000'000'000);
  EXPECT_EQ(parse_byte_size("500mb"), 500'000'000);
  EXPECT_EQ(parse_byte_size("2GiB"), int64_t{2} << 30);
  EXPECT_EQ(parse_byte_size("1.5 KiB"), 1536);
  EXPECT_EQ(parse_byte_size("123"), 123);
  for (const char* bad : {"", "GB", "-1GB", "0", "5XB", "1e30GB"}) EXPECT_EQ(parse_byte_size(bad), -1) << bad;
}

TEST(Validate, GlobalBatchAndAccumulation) {
  JobConfig c;
  c.training.global_batch_size = 12;
  EXPECT_EQ(config_error_of([&] { validate(c, 1); }),
            "training.global_batch_size=12 is not a multiple of local_batch_size (8) x data-parallel degree (1) = 8; "
            "set it to 8, 16, ... or -1");
  c.training.global_batch_size = 8;
  EXPECT_EQ(config_error_of([&] { validate(c, 2); }),
            "training.global_batch_size=8 is not a multiple of local_batch_size (8) x data-parallel degree (2) = 16; "
            "set it to 16, 32, ... or -1");
  EXPECT_NO_THROW(validate(c, 1));
  EXPECT_EQ(accumulation_steps(c, 1), 1);
  c.training.global_batch_size = 64;
  EXPECT_EQ(accumulation_steps(c, 2), 4);
  EXPECT_EQ(accumulation_steps(c, 1), 8);
  c.training.global_batch_size = -1;
  EXPECT_EQ(accumulation_steps(c, 4), 1);
  c.training.global_batch_size = 24;
  EXPECT_NE(config_error_of([&] { (void)accumulation_steps(c, 2); }).find("is not a multiple of"), std::string::npos);
}

TEST(Validate, ConfigErrorIsATitanError) {
  JobConfig c;
  c.training.steps = 0;
  EXPECT_THROW(validate(c, 1), titan::Error);
}

}  // namespace
}  // namespace titan::config
