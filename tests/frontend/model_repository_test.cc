// The model repository's inflight.json parser (every bad value named with its file and key),
// the directory layout rules, and the memory plan that splits a GPU between the models.
#include "frontend/model_repository.h"

#include <gtest/gtest.h>

#include <fstream>

#include "core/check.h"
#include "test_data.h"

namespace inflight::frontend {
namespace {

namespace fs = std::filesystem;

// The message of the inflight::Error `f` throws ("" when it throws none).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.message();
  }
  return "";
}

TEST(ModelSpec, ReadsEveryKeyOverTheDefaults) {
  ModelSpec defaults;
  defaults.max_model_len = 512;
  defaults.kv_cache_memory = "256MiB";
  const ModelSpec s = parse_model_spec(R"({
      "served_model_name": "tiny", "aliases": ["tiny-llama", "t"], "model": "m.gguf",
      "tokenizer": "tok.gguf", "device": "cuda:1", "gpu_memory_utilization": 0.25,
      "max_num_seqs": 8, "max_num_batched_tokens": 256, "block_size": 32, "max_logprobs": 5,
      "enable_prefix_caching": false, "quantization": "fp8", "kv_cache_dtype": "fp8",
      "dtype": "bfloat16", "chat_template": "t.jinja"})",
                                       "m/inflight.json", defaults);
  EXPECT_EQ(s.name, "tiny");
  EXPECT_EQ(s.aliases, (std::vector<std::string>{"tiny-llama", "t"}));
  EXPECT_EQ(s.model, "m.gguf");
  EXPECT_EQ(s.tokenizer, "tok.gguf");
  EXPECT_EQ(s.device, "cuda:1");
  EXPECT_DOUBLE_EQ(s.gpu_memory_utilization, 0.25);
  EXPECT_EQ(s.max_num_seqs, 8);
  EXPECT_EQ(s.max_num_batched_tokens, 256);
  EXPECT_EQ(s.block_size, 32);
  EXPECT_EQ(s.max_logprobs, 5);
  EXPECT_FALSE(s.enable_prefix_caching);
  EXPECT_EQ(s.quantization, "fp8");
  EXPECT_EQ(s.kv_cache_dtype, "fp8");
  EXPECT_EQ(s.dtype, "bfloat16");
  EXPECT_EQ(s.chat_template, "t.jinja");
  // Keys the file leaves out keep the serve flags' values.
  EXPECT_EQ(s.max_model_len, 512);
  EXPECT_EQ(s.kv_cache_memory, "256MiB");
}

TEST(ModelSpec, BadValuesAreRefusedNamingTheFileAndKey) {
  const struct {
    const char* json;
    const char* named;
  } cases[] = {
      {R"({"max_num_seq": 8})", "unknown key 'max_num_seq'"},
      {R"({"max_num_seqs": "8"})", "'max_num_seqs' must be an integer"},
      {R"({"max_num_seqs": -1})", "'max_num_seqs'"},
      {R"({"block_size": 0})", "'block_size'"},
      {R"({"gpu_memory_utilization": 1.5})", "'gpu_memory_utilization'"},
      {R"({"gpu_memory_utilization": 0})", "'gpu_memory_utilization'"},
      {R"({"aliases": "t"})", "'aliases' must be a list"},
      {R"({"aliases": [""]})", "'aliases'"},
      {R"({"device": ""})", "'device' must not be empty"},
      {R"({"kv_cache_memory": "lots"})", "'kv_cache_memory'"},
      {R"({"enable_prefix_caching": 1})", "'enable_prefix_caching'"},
      {R"([1])", "must be a JSON object"},
      {R"({"model": )", "malformed JSON"},
  };
  for (const auto& c : cases) {
    const std::string message =
        error_of([&] { parse_model_spec(c.json, "repo/tiny/inflight.json", ModelSpec{}); });
    EXPECT_NE(message.find("repo/tiny/inflight.json"), std::string::npos) << c.json;
    EXPECT_NE(message.find(c.named), std::string::npos) << c.json << " -> " << message;
  }
}

TEST(ModelRepository, DirectoriesNamesAndModelFiles) {
  const fs::path repo = testing::scratch_dir("model_repository_layout");
  fs::create_directories(repo / "b-gguf");
  std::ofstream(repo / "b-gguf" / "weights.gguf") << "x";
  fs::create_directories(repo / "a-hf");
  std::ofstream(repo / "a-hf" / "config.json") << "{}";
  std::ofstream(repo / "a-hf" / "inflight.json")
      << R"({"served_model_name": "alpha", "tokenizer": "tok/tokenizer.json"})";
  fs::create_directories(repo / ".hidden");
  std::ofstream(repo / "README.md") << "not a model";
  EXPECT_EQ(list_model_directories(repo), (std::vector<std::string>{"a-hf", "b-gguf"}));

  const ModelSpec a = read_model_spec(repo / "a-hf", ModelSpec{});
  EXPECT_EQ(a.name, "alpha");
  EXPECT_EQ(a.model, (repo / "a-hf").string());  // a Hugging Face directory
  EXPECT_EQ(a.tokenizer, (repo / "a-hf" / "tok/tokenizer.json").string());
  const ModelSpec b = read_model_spec(repo / "b-gguf", ModelSpec{});
  EXPECT_EQ(b.name, "b-gguf");  // the directory's name
  EXPECT_EQ(b.model, (repo / "b-gguf" / "weights.gguf").string());

  std::ofstream(repo / "b-gguf" / "other.gguf") << "y";
  EXPECT_NE(error_of([&] {
              read_model_spec(repo / "b-gguf", ModelSpec{});
            }).find("2 .gguf files; name the model's in inflight.json"),
            std::string::npos);
  EXPECT_NE(error_of([&] { list_model_directories(repo / "missing"); }).find("not a directory"),
            std::string::npos);
}

ModelSpec on(const std::string& name, const std::string& device, double share) {
  ModelSpec s;
  s.name = name;
  s.device = device;
  s.gpu_memory_utilization = share;
  return s;
}

TEST(MemoryPlan, NamedSharesKeptTheRestSplitEqually) {
  std::vector<ModelSpec> specs = {on("big", "cuda", 0.5), on("a", "auto", 0), on("b", "cuda:0", 0),
                                  on("cpu", "cpu", 0), on("other-gpu", "cuda:1", 0)};
  plan_memory_shares(specs, 0.9);
  EXPECT_DOUBLE_EQ(specs[0].gpu_memory_utilization, 0.5);
  EXPECT_DOUBLE_EQ(specs[1].gpu_memory_utilization, 0.2);
  EXPECT_DOUBLE_EQ(specs[2].gpu_memory_utilization, 0.2);
  EXPECT_DOUBLE_EQ(specs[3].gpu_memory_utilization, 0.0);  // the CPU: no share
  EXPECT_DOUBLE_EQ(specs[4].gpu_memory_utilization, 0.9);  // a GPU of its own
}

TEST(MemoryPlan, RefusesWhatCannotFitNamingTheModels) {
  std::vector<ModelSpec> over = {on("big", "cuda", 0.6), on("bigger", "auto", 0.4)};
  const std::string message = error_of([&] { plan_memory_shares(over, 0.9); });
  EXPECT_NE(message.find("big 0.6"), std::string::npos) << message;
  EXPECT_NE(message.find("bigger 0.4"), std::string::npos) << message;
  EXPECT_NE(message.find("cuda:0"), std::string::npos) << message;

  std::vector<ModelSpec> full = {on("all", "cuda", 0.9), on("left-out", "cuda", 0)};
  EXPECT_NE(error_of([&] { plan_memory_shares(full, 0.9); }).find("leave nothing"),
            std::string::npos);
  // Shares that sum to the budget exactly fit (0.3 + 0.6 is 0.8999... in binary).
  std::vector<ModelSpec> exact = {on("x", "cuda", 0.3), on("y", "cuda", 0.6)};
  EXPECT_EQ(error_of([&] { plan_memory_shares(exact, 0.9); }), "");
}

std::vector<std::string> names_of(const std::vector<RepositoryModel>& models) {
  std::vector<std::string> names;
  for (const auto& m : models) names.push_back(m.name + (m.error.empty() ? "" : "!"));
  return names;
}

TEST(ModelRepository, FollowsTheDirectoryAndPlansSharesAtLoad) {
  const fs::path repo = testing::scratch_dir("model_repository_follow");
  fs::create_directories(repo / "a");
  std::ofstream(repo / "a" / "m.gguf") << "x";
  std::ofstream(repo / "a" / "inflight.json") << R"({"gpu_memory_utilization": 0.5})";
  fs::create_directories(repo / "b");
  std::ofstream(repo / "b" / "m.gguf") << "x";
  fs::create_directories(repo / "bad");
  std::ofstream(repo / "bad" / "inflight.json") << R"({"max_num_seqs": "many"})";
  ModelRepository r(repo, ModelSpec{}, 0.9);
  EXPECT_EQ(names_of(r.initial()), (std::vector<std::string>{"a", "b", "bad!"}));
  EXPECT_NE(r.initial()[2].error.find("bad/inflight.json"), std::string::npos);
  EXPECT_DOUBLE_EQ(r.spec_to_load("b").gpu_memory_utilization, 0.4);  // planned at start

  // A directory added after start is found and planned beside the others when it loads.
  fs::create_directories(repo / "c");
  std::ofstream(repo / "c" / "m.gguf") << "x";
  std::ofstream(repo / "c" / "inflight.json") << R"({"aliases": ["sea"]})";
  EXPECT_NE(error_of([&] { r.spec_to_load("c"); }).find("no model 'c'"), std::string::npos);
  EXPECT_EQ(names_of(r.scan()), (std::vector<std::string>{"a", "b", "bad!", "c"}));
  EXPECT_EQ(r.scan()[3].aliases, (std::vector<std::string>{"sea"}));
  EXPECT_NE(error_of([&] { r.spec_to_load("c"); }).find("leave nothing"), std::string::npos);
  std::ofstream(repo / "c" / "inflight.json") << R"({"gpu_memory_utilization": 0.3})";
  EXPECT_NE(error_of([&] { r.spec_to_load("c"); }).find("ask for 1.2"), std::string::npos);
  // An edited file counts at the next load: a smaller share for b makes room for c.
  std::ofstream(repo / "b" / "inflight.json") << R"({"gpu_memory_utilization": 0.1})";
  EXPECT_DOUBLE_EQ(r.spec_to_load("b").gpu_memory_utilization, 0.1);
  EXPECT_DOUBLE_EQ(r.spec_to_load("c").gpu_memory_utilization, 0.3);

  // A removed directory leaves; a second directory serving a name is left out.
  fs::remove_all(repo / "bad");
  fs::create_directories(repo / "d");
  std::ofstream(repo / "d" / "m.gguf") << "x";
  std::ofstream(repo / "d" / "inflight.json") << R"({"served_model_name": "a"})";
  EXPECT_EQ(names_of(r.scan()), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(r.scan()[0].dir, repo / "a");
  fs::remove_all(repo / "c");
  EXPECT_NE(error_of([&] { r.spec_to_load("c"); }).find("its directory is gone"),
            std::string::npos);
}

TEST(ModelRepository, ChangedComparesTheFilesOfTheLastLoad) {
  const fs::path repo = testing::scratch_dir("model_repository_changed");
  fs::create_directories(repo / "a" / "sub");
  std::ofstream(repo / "a" / "m.gguf") << "x";
  std::ofstream(repo / "a" / "sub" / "tokenizer.json") << "{}";
  ModelRepository r(repo, ModelSpec{}, 0.9);
  EXPECT_TRUE(r.changed("a"));  // never loaded
  r.spec_to_load("a");
  EXPECT_TRUE(r.changed("a"));  // a load begun is not a load done
  r.loaded("a");
  EXPECT_FALSE(r.changed("a"));
  std::ofstream(repo / "a" / "sub" / "tokenizer.json") << "{\"a\": 1}";  // another size
  EXPECT_TRUE(r.changed("a"));
  r.spec_to_load("a");  // a reload that fails leaves the last load's files as the reference
  EXPECT_TRUE(r.changed("a"));
  r.loaded("a");
  EXPECT_FALSE(r.changed("a"));
  std::ofstream(repo / "a" / "inflight.json") << "{}";  // a file added
  EXPECT_TRUE(r.changed("a"));
  fs::remove(repo / "a" / "inflight.json");
  EXPECT_FALSE(r.changed("a"));
  EXPECT_TRUE(r.changed("nope"));
}

TEST(ModelRepository, RefusesAtStartTwoDirectoriesOfOneNameAndAnEmptyRepository) {
  const fs::path repo = testing::scratch_dir("model_repository_start");
  EXPECT_NE(error_of([&] { ModelRepository(repo, ModelSpec{}, 0.9); }).find("no model directory"),
            std::string::npos);
  for (const char* dir : {"x", "y"}) {
    fs::create_directories(repo / dir);
    std::ofstream(repo / dir / "m.gguf") << "x";
    std::ofstream(repo / dir / "inflight.json") << R"({"served_model_name": "same"})";
  }
  EXPECT_NE(
      error_of([&] { ModelRepository(repo, ModelSpec{}, 0.9); }).find("both serve the name 'same'"),
      std::string::npos);
}

}  // namespace
}  // namespace inflight::frontend
