// inflight._inflight: the engine API and the front end's prompt handling, for python/inflight.
// The Python package validates arguments and shapes results; this module converts, releases
// the GIL in every call that may block, and never lets a C++ exception through untranslated.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <nlohmann/json.hpp>

#include "core/logging.h"
#include "errors.h"
#include "formats/default_model.h"
#include "frontend/openai_protocol.h"
#include "frontend/prompt_builder.h"
#include "frontend/tool_calls.h"
#include "inflight/engine.h"
#include "py_engine.h"
#include "tokenizer/tokenizer.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace inflight::python {
namespace {

// Seconds on the steady clock (time.monotonic() on Linux); 0 for an unset point.
double seconds(TimePoint t) {
  return t == TimePoint{} ? 0.0 : std::chrono::duration<double>(t.time_since_epoch()).count();
}

nb::object finish_reason(const std::optional<FinishReason>& r) {
  if (!r) return nb::none();
  return nb::str(std::string(finish_reason_name(*r)).c_str());
}

// A prompt as Python gives it: str, or a sequence of token ids.
frontend::PromptInput prompt_input(nb::handle prompt) {
  frontend::PromptInput in;
  if (nb::isinstance<nb::str>(prompt)) {
    in.text = nb::cast<std::string>(prompt);
    if (in.text.empty()) throw nb::value_error("prompt: must not be empty");
    return in;
  }
  if (!nb::try_cast(prompt, in.token_ids) || in.token_ids.empty()) {
    throw nb::type_error("prompt: expected a non-empty str or a non-empty list of token ids (int)");
  }
  return in;
}

Request engine_request(const PyEngine& e, nb::handle prompt, const SamplingParams& sampling,
                       bool add_special_tokens, int32_t priority) {
  throw_if_error(sampling.validate());
  Request r = e.make_request(prompt_input(prompt), add_special_tokens, sampling);
  r.priority = priority;
  return r;
}

nb::dict stats_dict(const EngineStats& s) {
  nb::dict d;
  d["num_running"] = s.num_running;
  d["num_waiting"] = s.num_waiting;
  d["num_kv_blocks"] = s.num_kv_blocks;
  d["num_free_kv_blocks"] = s.num_free_kv_blocks;
  d["kv_usage"] = s.kv_usage;
  d["num_requests_enqueued"] = s.num_requests_enqueued;
  d["num_requests_finished"] = s.num_requests_finished;
  d["num_requests_stopped"] = s.num_requests_stopped;
  d["num_requests_length"] = s.num_requests_length;
  d["num_requests_aborted"] = s.num_requests_aborted;
  d["num_requests_failed"] = s.num_requests_failed;
  d["num_prompt_tokens"] = s.num_prompt_tokens;
  d["num_generation_tokens"] = s.num_generation_tokens;
  d["num_computed_tokens"] = s.num_computed_tokens;
  d["num_prefix_cache_queries"] = s.num_prefix_cache_queries;
  d["num_prefix_cache_hits"] = s.num_prefix_cache_hits;
  d["num_preemptions"] = s.num_preemptions;
  d["num_steps"] = s.num_steps;
  d["device_busy_seconds"] = s.device_busy_seconds;
  d["device_idle_seconds"] = s.device_idle_seconds;
  return d;
}

void bind_params(nb::module_& m) {
  nb::class_<SamplingParams>(m, "CoreSamplingParams")
      .def(nb::init<>())
      .def_rw("n", &SamplingParams::n)
      .def_rw("temperature", &SamplingParams::temperature)
      .def_rw("top_k", &SamplingParams::top_k)
      .def_rw("top_p", &SamplingParams::top_p)
      .def_rw("min_p", &SamplingParams::min_p)
      .def_rw("repetition_penalty", &SamplingParams::repetition_penalty)
      .def_rw("frequency_penalty", &SamplingParams::frequency_penalty)
      .def_rw("presence_penalty", &SamplingParams::presence_penalty)
      .def_rw("logit_bias", &SamplingParams::logit_bias)
      .def_rw("seed", &SamplingParams::seed)
      .def_rw("max_tokens", &SamplingParams::max_tokens)
      .def_rw("min_tokens", &SamplingParams::min_tokens)
      .def_rw("ignore_eos", &SamplingParams::ignore_eos)
      .def_rw("stop_token_ids", &SamplingParams::stop_token_ids)
      .def_rw("stop", &SamplingParams::stop)
      .def_rw("include_stop_str_in_output", &SamplingParams::include_stop_str_in_output)
      .def_rw("logprobs", &SamplingParams::logprobs)
      .def_rw("skip_special_tokens", &SamplingParams::skip_special_tokens)
      .def("validate", [](const SamplingParams& p) { throw_if_error(p.validate()); });

  nb::class_<ModelSource>(m, "ModelSource")
      .def(nb::init<>())
      .def_rw("path", &ModelSource::path)
      .def_rw("dummy_arch", &ModelSource::dummy_arch)
      .def_rw("dummy_config", &ModelSource::dummy_config)
      .def_rw("dummy_seed", &ModelSource::dummy_seed)
      .def_rw("tokenizer", &ModelSource::tokenizer)
      .def_rw("device", &ModelSource::device)
      .def_rw("quantization", &ModelSource::quantization)
      .def_rw("kv_cache_dtype", &ModelSource::kv_cache_dtype)
      .def_rw("tensor_parallel_size", &ModelSource::tensor_parallel_size)
      .def_rw("pipeline_parallel_size", &ModelSource::pipeline_parallel_size);

  nb::class_<EngineConfig>(m, "EngineConfig")
      .def(nb::init<>())
      .def_rw("block_size", &EngineConfig::block_size)
      .def_rw("num_kv_blocks", &EngineConfig::num_kv_blocks)
      .def_rw("kv_cache_memory_fraction", &EngineConfig::kv_cache_memory_fraction)
      .def_rw("kv_cache_bytes", &EngineConfig::kv_cache_bytes)
      .def_rw("enable_prefix_caching", &EngineConfig::enable_prefix_caching)
      .def_rw("max_model_len", &EngineConfig::max_model_len)
      .def_rw("max_num_seqs", &EngineConfig::max_num_seqs)
      .def_rw("max_num_batched_tokens", &EngineConfig::max_num_batched_tokens)
      .def_rw("enable_chunked_prefill", &EngineConfig::enable_chunked_prefill)
      .def_rw("long_prefill_token_threshold", &EngineConfig::long_prefill_token_threshold)
      .def_rw("schedule_conservativeness", &EngineConfig::schedule_conservativeness)
      .def_rw("max_logprobs", &EngineConfig::max_logprobs)
      .def_rw("device_sampling", &EngineConfig::device_sampling)
      .def("set_kv_cache_memory", [](EngineConfig& c, const std::string& text) {
        throw_if_error(parse_kv_cache_memory(text, c), "kv_cache_memory");
      });
}

void bind_outputs(nb::module_& m) {
  nb::class_<TokenLogprob>(m, "TokenLogprob")
      .def_ro("token_id", &TokenLogprob::token_id)
      .def_ro("logprob", &TokenLogprob::logprob)
      .def_ro("top", &TokenLogprob::top);

  nb::class_<Usage>(m, "Usage")
      .def_ro("prompt_tokens", &Usage::prompt_tokens)
      .def_ro("completion_tokens", &Usage::completion_tokens)
      .def_ro("cached_prompt_tokens", &Usage::cached_prompt_tokens);

  nb::class_<RequestTimings>(m, "RequestTimings")
      .def_prop_ro("arrival", [](const RequestTimings& t) { return seconds(t.arrival); })
      .def_prop_ro("first_scheduled",
                   [](const RequestTimings& t) { return seconds(t.first_scheduled); })
      .def_prop_ro("first_token", [](const RequestTimings& t) { return seconds(t.first_token); })
      .def_prop_ro("last_token", [](const RequestTimings& t) { return seconds(t.last_token); })
      .def_prop_ro("finished", [](const RequestTimings& t) { return seconds(t.finished); });

  nb::class_<RequestOutput>(m, "StreamOutput")
      .def_ro("id", &RequestOutput::id)
      .def_ro("index", &RequestOutput::index)
      .def_ro("token_ids", &RequestOutput::token_ids)
      .def_ro("text", &RequestOutput::text)
      .def_ro("logprobs", &RequestOutput::logprobs)
      .def_prop_ro("finish_reason",
                   [](const RequestOutput& o) { return finish_reason(o.finish_reason); })
      .def_ro("stop_string", &RequestOutput::stop_string)
      .def_ro("stop_token_id", &RequestOutput::stop_token_id)
      .def_ro("error", &RequestOutput::error)
      .def_ro("request_finished", &RequestOutput::request_finished)
      .def_ro("usage", &RequestOutput::usage)
      .def_ro("timings", &RequestOutput::timings);

  nb::class_<frontend::ChoiceResult>(m, "ChoiceResult")
      .def_ro("text", &frontend::ChoiceResult::text)
      .def_ro("token_ids", &frontend::ChoiceResult::token_ids)
      .def_ro("logprobs", &frontend::ChoiceResult::logprobs)
      .def_prop_ro("finish_reason",
                   [](const frontend::ChoiceResult& c) { return finish_reason(c.finish_reason); })
      .def_ro("stop_string", &frontend::ChoiceResult::stop_string)
      .def_ro("stop_token_id", &frontend::ChoiceResult::stop_token_id)
      .def_ro("error", &frontend::ChoiceResult::error);

  nb::class_<Completion>(m, "Completion")
      .def_ro("id", &Completion::id)
      .def_ro("prompt_token_ids", &Completion::prompt_token_ids)
      .def_prop_ro("choices", [](const Completion& c) { return c.result.choices; })
      .def_prop_ro("usage", [](const Completion& c) { return c.result.usage; })
      .def_prop_ro("timings", [](const Completion& c) { return c.result.timings.at(0); });
}

void bind_engine(nb::module_& m) {
  nb::class_<PyEngine>(m, "Engine")
      .def(
          "__init__",
          [](PyEngine* self, const ModelSource& source, const EngineConfig& config,
             const std::string& chat_template) {
            nb::gil_scoped_release release;
            new (self) PyEngine(source, config, chat_template);
          },
          "source"_a, "config"_a, "chat_template"_a = "")
      .def(
          "generate",
          [](PyEngine& e, nb::list prompts, nb::list params, bool add_special_tokens,
             nb::object progress) {
            // Prompts and params are converted with the GIL held; the wait runs without it and
            // takes it back only to check for signals (Ctrl-C) and report progress.
            std::vector<Request> requests;
            requests.reserve(prompts.size());
            for (size_t i = 0; i < prompts.size(); ++i) {
              const auto& p = nb::cast<const SamplingParams&>(params[params.size() == 1 ? 0 : i]);
              requests.push_back(engine_request(e, prompts[i], p, add_special_tokens, 0));
            }
            size_t reported = 0;
            auto poll = [&](size_t num_finished) {
              nb::gil_scoped_acquire acquire;
              if (PyErr_CheckSignals() != 0) throw nb::python_error();
              if (!progress.is_none() && num_finished != reported) {
                progress(num_finished - reported);
                reported = num_finished;
              }
            };
            nb::gil_scoped_release release;
            return e.run_batch(std::move(requests), poll);
          },
          "prompts"_a, "params"_a, "add_special_tokens"_a = true, "progress"_a = nb::none())
      .def(
          "submit",
          [](PyEngine& e, nb::handle prompt, const SamplingParams& params, bool add_special_tokens,
             int32_t priority) {
            // Returns (engine request id, prompt token ids).
            Request r = engine_request(e, prompt, params, add_special_tokens, priority);
            std::vector<int32_t> prompt_token_ids = r.prompt_token_ids;
            nb::gil_scoped_release release;
            return std::make_pair(e.submit(std::move(r)), std::move(prompt_token_ids));
          },
          "prompt"_a, "params"_a, "add_special_tokens"_a = true, "priority"_a = 0)
      .def("drain", &PyEngine::drain)
      .def_prop_ro("ready_fd", &PyEngine::ready_fd)
      .def("cancel", &PyEngine::cancel, "id"_a)
      .def("stats", [](const PyEngine& e) { return stats_dict(e.engine().stats()); })
      .def(
          "shutdown",
          [](PyEngine& e, bool abort) {
            nb::gil_scoped_release release;
            e.shutdown(abort ? ShutdownMode::kAbort : ShutdownMode::kDrain);
          },
          "abort"_a = true)
      .def(
          "encode",
          [](const PyEngine& e, const std::string& text, bool add_special_tokens) {
            nb::gil_scoped_release release;
            e.tokenizer();
            return frontend::tokenize(e.model(), text, add_special_tokens);
          },
          "text"_a, "add_special_tokens"_a = true)
      .def(
          "decode",
          [](const PyEngine& e, const std::vector<int32_t>& ids, bool skip_special_tokens) {
            nb::gil_scoped_release release;
            return e.tokenizer().decode(ids, skip_special_tokens);
          },
          "ids"_a, "skip_special_tokens"_a = true)
      .def(
          "chat_prompt",
          // `body`: the JSON of a chat completion request (messages, tools, chat_template_kwargs,
          // add_generation_prompt, continue_final_message), validated and normalised as the
          // server does. Returns (prompt token ids, whether tool calls should be parsed).
          [](const PyEngine& e, const std::string& body) {
            nb::gil_scoped_release release;
            const frontend::LoadedModel& model = e.model();
            e.tokenizer();
            const auto json = nlohmann::ordered_json::parse(body);
            frontend::ChatCompletionRequest req =
                frontend::parse_chat_completion_request(json, model.limits);
            frontend::ChatPromptOptions options{req.add_generation_prompt,
                                                req.continue_final_message, req.tools,
                                                req.chat_template_kwargs};
            const bool parse_tools =
                !req.tools.is_null() && !req.tools.empty() && !req.tool_choice_none;
            return std::make_pair(
                frontend::tokenize_chat(model, req.messages, options, req.add_special_tokens),
                parse_tools);
          },
          "body"_a)
      .def_prop_ro("model_name", [](const PyEngine& e) { return e.engine().model_name(); })
      .def_prop_ro("device_name", [](const PyEngine& e) { return e.engine().device_name(); })
      .def_prop_ro("config", [](const PyEngine& e) { return e.engine().config(); })
      .def_prop_ro("vocab_size", [](const PyEngine& e) { return e.engine().vocab_size(); })
      .def_prop_ro("has_chat_template",
                   [](const PyEngine& e) { return e.model().chat_template != nullptr; })
      .def_prop_ro("has_tokenizer",
                   [](const PyEngine& e) { return e.model().tokenizer != nullptr; })
      .def_prop_ro("eos_token_id", [](const PyEngine& e) { return e.tokenizer().eos_id(); })
      .def_prop_ro("bos_token_id", [](const PyEngine& e) { return e.tokenizer().bos_id(); });
}

}  // namespace
}  // namespace inflight::python

NB_MODULE(_inflight, m) {
  using namespace inflight;
  using namespace inflight::python;
  m.doc() = "inflight engine bindings (use the `inflight` package, not this module)";
  init_logging();  // the engine logs to stderr at $INFLIGHT_LOG_LEVEL, as the tools do
  register_error_translator();
  bind_params(m);
  bind_outputs(m);
  bind_engine(m);
  m.def("default_model_path", &find_default_model);
  // Parallel jobs (inflight/_parallel.py): the other ranks started by this process, or joined
  // under mpirun; a rank other than 0 runs its shard's steps until rank 0's engine goes.
  m.def(
      "start_workers",
      [](const ModelSource& source, const std::vector<std::string>& command) {
        nb::gil_scoped_release release;
        throw_if_error(Engine::start_workers(source, command), "cannot start the worker ranks");
      },
      "source"_a, "command"_a);
  m.def("join_parallel_job", [] {
    nb::gil_scoped_release release;
    return Engine::join_parallel_job();
  });
  m.def(
      "run_worker",
      [](const ModelSource& source) {
        nb::gil_scoped_release release;
        throw_if_error(Engine::run_worker(source));
      },
      "source"_a);
  m.def(
      "parse_tool_calls",
      [](const std::string& parser, const std::string& text, const std::string& tools_json) {
        const auto p = frontend::tool_call_parser_named(parser);
        if (!p)
          throw nb::value_error(("tool_call_parser: unknown parser '" + parser + "'").c_str());
        // The request's tools (JSON text, "" for none): the XML formats type values by them.
        const auto tools = tools_json.empty()
                               ? nlohmann::ordered_json()
                               : nlohmann::ordered_json::parse(tools_json, nullptr, false);
        if (tools.is_discarded()) throw nb::value_error("tools: not JSON");
        const frontend::ParsedOutput parsed = frontend::parse_tool_calls(*p, text, tools);
        std::vector<std::pair<std::string, std::string>> calls;
        for (const auto& c : parsed.calls) calls.emplace_back(c.name, c.arguments);
        return std::make_pair(frontend::message_content(parsed), calls);
      },
      "parser"_a, "text"_a, "tools_json"_a = "");
  m.attr("tool_call_parsers") = nb::tuple(nb::cast(frontend::tool_call_parser_name_list()));
}
