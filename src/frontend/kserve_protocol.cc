#include "frontend/kserve_protocol.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>

#include "frontend/api_error.h"
#include "frontend/json_fields.h"

namespace inflight::frontend {

using json = nlohmann::ordered_json;

size_t KServeTensor::element_count() const {
  return bytes.size() + reals.size() + integers.size();
}

namespace {

// Bytes per element of a fixed-size datatype; 0 for BYTES; nullopt when unknown.
std::optional<size_t> element_size(std::string_view datatype) {
  static const std::map<std::string_view, size_t> kSizes = {
      {"BOOL", 1},   {"INT8", 1},  {"UINT8", 1},  {"INT16", 2}, {"UINT16", 2}, {"INT32", 4},
      {"UINT32", 4}, {"INT64", 8}, {"UINT64", 8}, {"FP32", 4},  {"FP64", 8},   {"BYTES", 0}};
  auto it = kSizes.find(datatype);
  if (it == kSizes.end()) return std::nullopt;
  return it->second;
}

[[noreturn]] void bad_input(const std::string& name, const std::string& what) {
  throw_bad_request(fmt::format("input '{}': {}", name, what), name);
}

// The element count a shape describes; 400 on a negative dimension or an overflow.
size_t shape_elements(const KServeTensor& t) {
  size_t n = 1;
  for (int64_t d : t.shape) {
    if (d < 0)
      bad_input(t.name, fmt::format("negative dimension in shape [{}]", fmt::join(t.shape, ",")));
    if (d > 0 && n > (size_t{1} << 40) / static_cast<size_t>(d))
      bad_input(t.name, "shape too large");
    n *= static_cast<size_t>(d);
  }
  return n;
}

template <typename T>
T load_le(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));  // little-endian hosts only (x86-64, aarch64)
  return v;
}

}  // namespace

void check_element_count(const KServeTensor& t) {
  if (t.element_count() != shape_elements(t)) {
    bad_input(t.name, fmt::format("{} elements for shape [{}]", t.element_count(),
                                  fmt::join(t.shape, ",")));
  }
}

void decode_raw_tensor(KServeTensor& t, std::string_view raw) {
  const std::optional<size_t> size = element_size(t.datatype);
  if (!size) bad_input(t.name, fmt::format("unsupported datatype '{}'", t.datatype));
  const size_t count = shape_elements(t);
  if (*size == 0) {
    size_t pos = 0;
    while (pos < raw.size()) {
      if (raw.size() - pos < 4) bad_input(t.name, "truncated BYTES element length");
      const uint32_t len = load_le<uint32_t>(raw.data() + pos);
      pos += 4;
      if (raw.size() - pos < len) bad_input(t.name, "truncated BYTES element");
      t.bytes.emplace_back(raw.substr(pos, len));
      pos += len;
    }
    if (t.bytes.size() != count) {
      bad_input(t.name, fmt::format("{} BYTES elements for shape [{}]", t.bytes.size(),
                                    fmt::join(t.shape, ",")));
    }
    return;
  }
  if (raw.size() != count * *size) {
    bad_input(t.name, fmt::format("{} bytes of raw data, shape [{}] of {} needs {}", raw.size(),
                                  fmt::join(t.shape, ","), t.datatype, count * *size));
  }
  const char* p = raw.data();
  const std::string_view dt = t.datatype;
  for (size_t i = 0; i < count; ++i, p += *size) {
    if (dt == "FP32") {
      t.reals.push_back(load_le<float>(p));
    } else if (dt == "FP64") {
      t.reals.push_back(load_le<double>(p));
    } else if (dt == "BOOL") {
      t.integers.push_back(*p != 0);
    } else if (dt == "INT8") {
      t.integers.push_back(load_le<int8_t>(p));
    } else if (dt == "UINT8") {
      t.integers.push_back(load_le<uint8_t>(p));
    } else if (dt == "INT16") {
      t.integers.push_back(load_le<int16_t>(p));
    } else if (dt == "UINT16") {
      t.integers.push_back(load_le<uint16_t>(p));
    } else if (dt == "INT32") {
      t.integers.push_back(load_le<int32_t>(p));
    } else if (dt == "UINT32") {
      t.integers.push_back(load_le<uint32_t>(p));
    } else {  // INT64, UINT64
      t.integers.push_back(load_le<int64_t>(p));
    }
  }
}

namespace {

// Appends the elements of a JSON tensor's "data" (flat or nested lists) to `t`.
void append_json_data(KServeTensor& t, const json& data) {
  if (data.is_array()) {
    for (const json& v : data) append_json_data(t, v);
    return;
  }
  const std::string_view dt = t.datatype;
  if (dt == "BYTES") {
    if (!data.is_string()) bad_input(t.name, "BYTES elements must be strings");
    t.bytes.push_back(data.get<std::string>());
  } else if (dt == "BOOL") {
    if (!data.is_boolean()) bad_input(t.name, "BOOL elements must be true or false");
    t.integers.push_back(data.get<bool>());
  } else if (dt == "FP32" || dt == "FP64") {
    if (!data.is_number()) bad_input(t.name, fmt::format("{} elements must be numbers", dt));
    t.reals.push_back(data.get<double>());
  } else if (dt == "UINT64" && data.is_number_unsigned()) {
    t.integers.push_back(static_cast<int64_t>(data.get<uint64_t>()));
  } else {
    if (!data.is_number_integer())
      bad_input(t.name, fmt::format("{} elements must be integers", dt));
    t.integers.push_back(data.get<int64_t>());
  }
}

const json* object_field(const json& object, std::string_view name) {
  auto it = object.find(name);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

}  // namespace

KServeInferRequest parse_kserve_http_infer(std::string_view body,
                                           std::optional<size_t> json_length) {
  if (json_length && *json_length > body.size()) {
    throw_bad_request("Inference-Header-Content-Length exceeds the body");
  }
  std::string_view binary = json_length ? body.substr(*json_length) : std::string_view();
  const json j = parse_json_object(json_length ? body.substr(0, *json_length) : body);
  KServeInferRequest req;
  FieldReader top(j);
  req.id = top.string("id").value_or("");
  const json* inputs = top.get("inputs");
  if (inputs == nullptr || !inputs->is_array())
    throw_bad_request("'inputs' must be a list", "inputs");
  for (const json& in : *inputs) {
    if (!in.is_object()) throw_bad_request("each of 'inputs' must be an object", "inputs");
    FieldReader r(in);
    KServeTensor t;
    t.name = r.string("name").value_or("");
    if (t.name.empty()) throw_bad_request("an input has no 'name'", "inputs");
    t.datatype = r.string("datatype").value_or("");
    const json* shape = r.get("shape");
    if (shape == nullptr || !shape->is_array()) bad_input(t.name, "'shape' must be a list");
    for (const json& d : *shape) {
      if (!d.is_number_integer()) bad_input(t.name, "'shape' must hold integers");
      t.shape.push_back(d.get<int64_t>());
    }
    if (!element_size(t.datatype))
      bad_input(t.name, fmt::format("unsupported datatype '{}'", t.datatype));
    const json* params = r.get("parameters");
    const json* binary_size =
        params && params->is_object() ? object_field(*params, "binary_data_size") : nullptr;
    if (binary_size != nullptr) {
      if (!binary_size->is_number_unsigned() || binary_size->get<uint64_t>() > binary.size()) {
        bad_input(t.name, "'binary_data_size' exceeds the binary data");
      }
      const size_t n = binary_size->get<size_t>();
      decode_raw_tensor(t, binary.substr(0, n));
      binary.remove_prefix(n);
    } else {
      const json* data = r.get("data");
      if (data == nullptr) bad_input(t.name, "no 'data'");
      append_json_data(t, *data);
      check_element_count(t);
    }
    req.inputs.push_back(std::move(t));
  }
  if (const json* params = top.get("parameters"); params && params->is_object()) {
    const json* all = object_field(*params, "binary_data_output");
    req.binary_outputs.all = all != nullptr && all->is_boolean() && all->get<bool>();
  }
  if (const json* outputs = top.get("outputs"); outputs && outputs->is_array()) {
    for (const json& out : *outputs) {
      const json* name = out.is_object() ? object_field(out, "name") : nullptr;
      const json* params = out.is_object() ? object_field(out, "parameters") : nullptr;
      const json* binary =
          params && params->is_object() ? object_field(*params, "binary_data") : nullptr;
      if (name && name->is_string() && binary && binary->is_boolean() && binary->get<bool>()) {
        req.binary_outputs.names.push_back(name->get<std::string>());
      }
    }
  }
  return req;
}

std::string move_outputs_to_binary(json& response, const KServeBinaryOutputs& binary) {
  std::string blob;
  for (json& out : response["outputs"]) {
    const std::string name = out["name"].get<std::string>();
    if (!binary.all &&
        std::find(binary.names.begin(), binary.names.end(), name) == binary.names.end()) {
      continue;
    }
    const size_t start = blob.size();
    const bool bytes = out["datatype"] == "BYTES";
    for (const json& v : out["data"]) {
      if (bytes) {
        const std::string& s = v.get_ref<const std::string&>();
        const uint32_t n = static_cast<uint32_t>(s.size());
        blob.append(reinterpret_cast<const char*>(&n), 4);
        blob += s;
      } else {
        const float f = v.get<float>();
        blob.append(reinterpret_cast<const char*>(&f), 4);
      }
    }
    out.erase("data");
    out["parameters"] = {{"binary_data_size", blob.size() - start}};
  }
  return blob;
}

const std::vector<TensorSpec>& trtllm_inputs() {
  static const std::vector<TensorSpec> kInputs = {
      {"text_input", "BYTES", {-1, 1}, false},
      {"max_tokens", "INT32", {-1, 1}, false},
      {"bad_words", "BYTES", {-1, -1}},
      {"stop_words", "BYTES", {-1, -1}},
      {"end_id", "INT32", {-1, 1}},
      {"pad_id", "INT32", {-1, 1}},
      {"top_k", "INT32", {-1, 1}},
      {"top_p", "FP32", {-1, 1}},
      {"temperature", "FP32", {-1, 1}},
      {"length_penalty", "FP32", {-1, 1}},
      {"repetition_penalty", "FP32", {-1, 1}},
      {"min_length", "INT32", {-1, 1}},
      {"presence_penalty", "FP32", {-1, 1}},
      {"frequency_penalty", "FP32", {-1, 1}},
      {"random_seed", "UINT64", {-1, 1}},
      {"return_log_probs", "BOOL", {-1, 1}},
      {"beam_width", "INT32", {-1, 1}},
      {"stream", "BOOL", {-1, 1}},
      {"exclude_input_in_output", "BOOL", {-1, 1}},
      {"ignore_eos", "BOOL", {-1, 1}},  // inflight's: generate past EOS (benchmarks)
  };
  return kInputs;
}

const std::vector<TensorSpec>& trtllm_outputs() {
  static const std::vector<TensorSpec> kOutputs = {
      {"text_output", "BYTES", {-1, -1}, false},
      {"cum_log_probs", "FP32", {-1, -1}},
      {"output_log_probs", "FP32", {-1, -1}},
  };
  return kOutputs;
}

KServeInferRequest parse_kserve_generate(std::string_view body) {
  const json j = parse_json_object(body);
  const json* params = object_field(j, "parameters");
  if (params != nullptr && !params->is_object()) {
    throw_bad_request("'parameters' must be an object", "parameters");
  }
  KServeInferRequest req;
  FieldReader top(j);
  req.id = top.string("id").value_or("");
  for (const TensorSpec& spec : trtllm_inputs()) {
    const json* v = object_field(j, spec.name);
    if (v == nullptr && params != nullptr) v = object_field(*params, spec.name);
    if (v == nullptr) continue;
    KServeTensor t;
    t.name = spec.name;
    t.datatype = spec.datatype;
    append_json_data(t, *v);
    t.shape = {1, static_cast<int64_t>(t.element_count())};
    req.inputs.push_back(std::move(t));
  }
  return req;
}

namespace {

// Reads the ensemble's inputs by name, checking datatype and shape.
class InputReader {
 public:
  explicit InputReader(const KServeInferRequest& req) {
    for (const KServeTensor& t : req.inputs) {
      const TensorSpec* spec = nullptr;
      for (const TensorSpec& s : trtllm_inputs()) {
        if (s.name == t.name) spec = &s;
      }
      if (spec == nullptr) bad_input(t.name, "unexpected inference input for this model");
      if (t.datatype != spec->datatype) {
        bad_input(t.name,
                  fmt::format("unexpected datatype {}, expecting {}", t.datatype, spec->datatype));
      }
      if (t.shape.empty() || t.shape.size() > 2 || (t.shape.size() == 2 && t.shape[0] != 1)) {
        bad_input(t.name,
                  fmt::format("unexpected shape [{}], expecting [n] or [1, n] (batch size 1)",
                              fmt::join(t.shape, ",")));
      }
      if (!inputs_.emplace(t.name, &t).second) bad_input(t.name, "given twice");
    }
  }

  const KServeTensor* get(std::string_view name) const {
    auto it = inputs_.find(name);
    return it == inputs_.end() ? nullptr : it->second;
  }
  const KServeTensor& required(std::string_view name) const {
    const KServeTensor* t = get(name);
    if (t == nullptr) {
      throw_bad_request(fmt::format("expected input '{}' is missing", name), std::string(name));
    }
    return *t;
  }
  // The one element of a scalar input.
  std::optional<int64_t> integer(std::string_view name, int64_t lo, int64_t hi) const {
    const KServeTensor* t = scalar(name);
    if (t == nullptr) return std::nullopt;
    const int64_t v = t->integers[0];
    if (v < lo || v > hi) bad_input(t->name, fmt::format("must be in [{}, {}], got {}", lo, hi, v));
    return v;
  }
  std::optional<double> real(std::string_view name, double lo, double hi) const {
    const KServeTensor* t = scalar(name);
    if (t == nullptr) return std::nullopt;
    const double v = t->reals[0];
    if (!std::isfinite(v) || v < lo || v > hi) {
      bad_input(t->name, fmt::format("must be in [{}, {}], got {}", lo, hi, v));
    }
    return v;
  }
  std::optional<bool> boolean(std::string_view name) const {
    const KServeTensor* t = scalar(name);
    if (t == nullptr) return std::nullopt;
    return t->integers[0] != 0;
  }
  std::vector<std::string> words(std::string_view name) const {
    const KServeTensor* t = get(name);
    std::vector<std::string> out;
    if (t == nullptr) return out;
    for (const std::string& w : t->bytes) {
      if (!w.empty()) out.push_back(w);
    }
    return out;
  }

 private:
  const KServeTensor* scalar(std::string_view name) const {
    const KServeTensor* t = get(name);
    if (t != nullptr && t->element_count() != 1) {
      bad_input(t->name, fmt::format("expects one element, got {} (shape [{}])", t->element_count(),
                                     fmt::join(t->shape, ",")));
    }
    return t;
  }
  std::map<std::string, const KServeTensor*, std::less<>> inputs_;
};

}  // namespace

TrtLlmRequest parse_trtllm_request(const KServeInferRequest& request,
                                   const ProtocolLimits& limits) {
  const InputReader in(request);
  TrtLlmRequest req;
  const KServeTensor& text = in.required("text_input");
  if (text.bytes.size() != 1) {
    bad_input(text.name,
              fmt::format("expects one element (batch size 1), got {}", text.bytes.size()));
  }
  if (text.bytes[0].empty()) bad_input(text.name, "must not be empty");
  req.text_input = text.bytes[0];
  req.text_rank = text.shape.size();
  in.required("max_tokens");

  constexpr int64_t kI32 = std::numeric_limits<int32_t>::max();
  constexpr double kMaxF = std::numeric_limits<float>::max();
  SamplingParams& s = req.sampling;
  s.max_tokens = static_cast<int32_t>(*in.integer("max_tokens", 1, kI32));
  auto temperature = in.real("temperature", 0, kMaxF);
  auto top_k = in.integer("top_k", 0, kI32);
  auto top_p = in.real("top_p", 0, 1);
  // TensorRT-LLM is greedy unless a sampling input asks otherwise; top_p 0 means "off" there.
  const bool sample = temperature || (top_k && *top_k != 1) || (top_p && *top_p > 0);
  s.temperature = sample ? static_cast<float>(temperature.value_or(1.0)) : 0.0f;
  s.top_k = static_cast<int32_t>(top_k.value_or(0));
  s.top_p = top_p && *top_p > 0 ? static_cast<float>(*top_p) : 1.0f;
  s.repetition_penalty = static_cast<float>(in.real("repetition_penalty", 0, kMaxF).value_or(1.0));
  if (s.repetition_penalty <= 0) bad_input("repetition_penalty", "must be > 0");
  s.presence_penalty = static_cast<float>(in.real("presence_penalty", -2, 2).value_or(0.0));
  s.frequency_penalty = static_cast<float>(in.real("frequency_penalty", -2, 2).value_or(0.0));
  in.real("length_penalty", -kMaxF, kMaxF);  // beam search only: no effect at beam width 1
  s.min_tokens = static_cast<int32_t>(in.integer("min_length", 0, kI32).value_or(0));
  if (auto seed = in.integer("random_seed", std::numeric_limits<int64_t>::min(),
                             std::numeric_limits<int64_t>::max())) {
    s.seed = static_cast<uint64_t>(*seed);
  }
  if (auto beam = in.integer("beam_width", 1, kI32); beam && *beam != 1) {
    bad_input("beam_width", "only 1 is supported");
  }
  if (auto end_id = in.integer("end_id", 0, limits.vocab_size - 1)) {
    // The request's end token replaces the model's EOS.
    s.ignore_eos = true;
    s.stop_token_ids = {static_cast<int32_t>(*end_id)};
  }
  in.integer("pad_id", 0, limits.vocab_size - 1);  // padding is internal: no effect
  s.stop = in.words("stop_words");
  if (s.stop.size() > static_cast<size_t>(limits.max_stop)) {
    bad_input("stop_words", fmt::format("at most {} stop words", limits.max_stop));
  }
  req.bad_words = in.words("bad_words");
  if (in.boolean("ignore_eos").value_or(false)) s.ignore_eos = true;
  req.stream = in.boolean("stream").value_or(false);
  req.exclude_input_in_output = in.boolean("exclude_input_in_output").value_or(false);
  req.return_log_probs = in.boolean("return_log_probs").value_or(false);
  if (req.return_log_probs) s.logprobs = 0;
  return req;
}

}  // namespace inflight::frontend
