#include "engine/request_state.h"

#include <algorithm>

#include "core/check.h"
#include "tokenizer/tokenizer.h"

namespace inflight {

RequestState::RequestState(RequestId id, PreparedRequest prepared, const Tokenizer* tokenizer,
                           std::span<const int32_t> eos_ids, int64_t seq_id, TimePoint arrival)
    : id_(id), prepared_(std::move(prepared)), tokenizer_(tokenizer) {
  const SamplingParams& p = prepared_.params;
  if (!p.ignore_eos) stop_ids_.assign(eos_ids.begin(), eos_ids.end());
  stop_ids_.insert(stop_ids_.end(), p.stop_token_ids.begin(), p.stop_token_ids.end());
  std::sort(stop_ids_.begin(), stop_ids_.end());
  stop_ids_.erase(std::unique(stop_ids_.begin(), stop_ids_.end()), stop_ids_.end());

  stream_ = std::make_shared<detail::StreamState>(id, std::move(prepared_.notify));
  choices_.resize(static_cast<size_t>(p.n));
  auto seq = std::make_unique<Sequence>();
  seq->id = seq_id;
  seq->request_id = id;
  seq->num_choices = p.n;
  seq->priority = prepared_.priority;
  seq->arrival = id;  // ids grow with enqueue order
  seq->token_ids = prepared_.prompt;
  seq->num_prompt_tokens = num_prompt_tokens();
  seq->max_num_tokens = prepared_.max_num_tokens;
  seq->wants_prompt_logprobs = p.prompt_logprobs.has_value();
  choices_[0].seq = std::move(seq);
  for (Choice& c : choices_) {
    if (tokenizer_ != nullptr) {
      // Decoded as a continuation of the prompt (no leading-space removal on its first token).
      c.detok = std::make_unique<IncrementalDetokenizer>(*tokenizer_, p.skip_special_tokens,
                                                         prepared_.prompt);
    }
    c.stop = std::make_unique<StopMatcher>(p.stop, p.include_stop_str_in_output);
    if (prepared_.grammar != nullptr) {
      // The constraint allows a stop token only once complete: EOS even under ignore_eos (the
      // choice then ends when the matcher terminates).
      std::vector<int32_t> ends(eos_ids.begin(), eos_ids.end());
      ends.insert(ends.end(), p.stop_token_ids.begin(), p.stop_token_ids.end());
      c.matcher = std::make_unique<GrammarMatcher>(prepared_.grammar, ends);
    }
  }
  timings_.arrival = arrival;
}

void RequestState::on_scheduled(TimePoint now, EngineStats& stats) {
  if (timings_.first_scheduled != TimePoint{}) return;
  timings_.first_scheduled = now;
  stats.queue_time.observe(timings_.queue_seconds());
}

bool RequestState::in_flight() const {
  return std::any_of(choices_.begin(), choices_.end(),
                     [](const Choice& c) { return c.seq != nullptr && c.seq->in_flight; });
}

bool RequestState::is_stop_token(int32_t token) const {
  return std::binary_search(stop_ids_.begin(), stop_ids_.end(), token);
}

void RequestState::suppressed_tokens(const Sequence& seq, std::vector<int32_t>& out) const {
  out.clear();
  if (seq.num_output_tokens() < prepared_.params.min_tokens) out = stop_ids_;
}

int32_t RequestState::candidates_needed(const Sequence& seq) const {
  const bool suppressing =
      seq.num_output_tokens() < prepared_.params.min_tokens && !stop_ids_.empty();
  return Sampler::candidates_needed(prepared_.params, suppressing);
}

int32_t RequestState::sample(Sequence& seq, int32_t choice, const LogitsView& logits,
                             StepContext& ctx, TokenLogprob* logprob) {
  suppressed_tokens(seq, suppressed_);
  const std::span<const int32_t> all(seq.token_ids);
  SamplingContext sc{&prepared_.params,
                     all.first(static_cast<size_t>(seq.num_prompt_tokens)),
                     all.subspan(static_cast<size_t>(seq.num_prompt_tokens)),
                     prepared_.seed,
                     choice,
                     suppressed_};
  return ctx.sampler.sample(logits, sc, logprob);
}

void RequestState::on_logits(Sequence& seq, const LogitsView& logits, StepContext& ctx) {
  if (seq.num_choices > 1) {
    fork(seq, logits, ctx);
    return;
  }
  TokenLogprob lp;
  const bool want_lp = prepared_.params.logprobs.has_value();
  const int32_t token = sample(seq, seq.choice, logits, ctx, want_lp ? &lp : nullptr);
  seq.token_ids.push_back(token);
  accept(seq.choice, token, want_lp ? &lp : nullptr, ctx);
}

void RequestState::on_prompt_logits(const LogitsView& logits, StepContext& ctx) {
  const auto next = static_cast<size_t>(num_prompt_logprobs_ + 1);
  INFLIGHT_CHECK(!logits.full.empty() && next < prepared_.prompt.size(),
                 "prompt logprob row {} of a {}-token prompt (whole row: {})", next - 1,
                 prepared_.prompt.size(), !logits.full.empty());
  TokenLogprob& lp = prompt_logprobs_.emplace_back();
  ctx.sampler.fill_logprobs(logits.full, prepared_.prompt[next], *prepared_.params.prompt_logprobs,
                            lp);
  ++num_prompt_logprobs_;
}

void RequestState::fork(Sequence& parent, const LogitsView& logits, StepContext& ctx) {
  // Every choice draws its first token from the parent's logits: copy a whole row, since
  // sampling modifies it (candidates are only read).
  fork_logits_.assign(logits.full.begin(), logits.full.end());
  const auto n = static_cast<int32_t>(choices_.size());
  const bool want_lp = prepared_.params.logprobs.has_value();
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  std::vector<TokenLogprob> lps(static_cast<size_t>(n));
  std::vector<Sequence*> children;
  for (int32_t c = 0; c < n; ++c) {
    std::copy(fork_logits_.begin(), fork_logits_.end(), logits.full.begin());
    tokens[static_cast<size_t>(c)] =
        sample(parent, c, logits, ctx, want_lp ? &lps[static_cast<size_t>(c)] : nullptr);
    if (c == 0) continue;
    auto child = std::make_unique<Sequence>();
    child->id = ctx.next_seq_id++;
    child->request_id = id_;
    child->choice = c;
    child->priority = parent.priority;
    child->arrival = parent.arrival;
    child->token_ids.assign(parent.token_ids.begin(),
                            parent.token_ids.begin() + parent.num_prompt_tokens);
    child->token_ids.push_back(tokens[static_cast<size_t>(c)]);
    child->num_prompt_tokens = parent.num_prompt_tokens;
    child->max_num_tokens = parent.max_num_tokens;
    children.push_back(child.get());
    choices_[static_cast<size_t>(c)].seq = std::move(child);
  }
  parent.token_ids.push_back(tokens[0]);
  ctx.scheduler.fork(parent, children);  // children share the prompt's full blocks
  for (int32_t c = 0; c < n; ++c) {
    accept(c, tokens[static_cast<size_t>(c)], want_lp ? &lps[static_cast<size_t>(c)] : nullptr,
           ctx);
  }
}

RequestOutput& RequestState::output(int32_t choice, TimePoint now) {
  Choice& c = choices_[static_cast<size_t>(choice)];
  if (c.pending < 0) {
    c.pending = static_cast<int32_t>(outbox_.size());
    RequestOutput& o = outbox_.emplace_back();
    o.id = id_;
    o.index = choice;
    o.time = now;
  }
  return outbox_[static_cast<size_t>(c.pending)];
}

std::string RequestState::take_text(Choice& c, int32_t token, bool is_stop_token, bool last) {
  if (!c.detok) return {};
  std::string delta;
  // A stop token's own text is shown only with include_stop_str_in_output (as for strings).
  if (!is_stop_token || prepared_.params.include_stop_str_in_output) delta = c.detok->push(token);
  if (last) delta += c.detok->finish();
  return delta;
}

void RequestState::accept(int32_t choice, int32_t token, const TokenLogprob* logprob,
                          StepContext& ctx) {
  Choice& c = choices_[static_cast<size_t>(choice)];
  const Sequence& seq = *c.seq;
  RequestOutput& out = output(choice, ctx.now);
  out.token_ids.push_back(token);
  if (logprob != nullptr) out.logprobs.push_back(*logprob);
  if (choice == 0 && !prompt_logprobs_.empty()) out.prompt_logprobs = std::move(prompt_logprobs_);

  ++num_completion_tokens_;
  ++ctx.stats.num_generation_tokens;
  if (timings_.first_token == TimePoint{}) {
    timings_.first_token = ctx.now;
    ctx.stats.time_to_first_token.observe(timings_.ttft_seconds());
  }
  if (c.last_token != TimePoint{}) {
    ctx.stats.inter_token_latency.observe(RequestTimings::seconds(c.last_token, ctx.now));
  }
  c.last_token = ctx.now;
  timings_.last_token = ctx.now;

  std::optional<FinishReason> reason;
  if (c.matcher != nullptr) {
    // Masking allows only what the matcher accepts, so a rejection means the mask was not
    // applied (a bug): the request fails rather than return text breaking its constraint.
    INFLIGHT_CHECK(c.matcher->accept(token),
                   "the structured output constraint rejected token {} that was sampled", token);
  }
  const bool stop_token = is_stop_token(token);
  if (stop_token) {
    reason = FinishReason::kStop;
    out.stop_token_id = token;
  } else if (c.matcher != nullptr && c.matcher->terminated()) {
    reason = FinishReason::kStop;  // EOS under ignore_eos ended the constraint
  } else if (seq.num_tokens() >= prepared_.max_num_tokens) {
    reason = FinishReason::kLength;
  }
  const StopMatcher::Update up =
      c.stop->append(take_text(c, token, stop_token, reason.has_value()));
  out.text += up.text;
  if (up.matched_stop) {
    reason = FinishReason::kStop;
    out.stop_string = prepared_.params.stop[*up.matched_stop];
    out.stop_token_id.reset();
  } else if (reason) {
    out.text += c.stop->flush();
  }
  if (reason) finish_choice(choice, *reason, ctx);
}

void RequestState::finish_choice(int32_t choice, FinishReason reason, StepContext& ctx) {
  Choice& c = choices_[static_cast<size_t>(choice)];
  if (c.finished) return;
  c.finished = true;
  ++num_finished_;
  if (c.seq) ctx.scheduler.finish(*c.seq);  // running | waiting -> finished, blocks freed
  RequestOutput& out = output(choice, ctx.now);
  out.finish_reason = reason;
  if (!finished()) return;

  timings_.finished = ctx.now;
  // The request's last output is the one queued last.
  RequestOutput& last = outbox_.back();
  last.request_finished = true;
  last.usage.prompt_tokens = num_prompt_tokens();
  last.usage.completion_tokens = num_completion_tokens_;
  last.usage.cached_prompt_tokens = std::max(0, choices_[0].seq->num_cached_prompt_tokens);
  last.timings = timings_;

  EngineStats& s = ctx.stats;
  ++s.num_requests_finished;
  s.num_prompt_tokens += static_cast<uint64_t>(num_prompt_tokens());
  s.e2e_latency.observe(timings_.e2e_seconds());
  switch (reason) {
    case FinishReason::kStop:
      ++s.num_requests_stopped;
      break;
    case FinishReason::kLength:
      ++s.num_requests_length;
      break;
    case FinishReason::kAbort:
      ++s.num_requests_aborted;
      break;
    case FinishReason::kError:
      ++s.num_requests_failed;
      break;
  }
}

void RequestState::abort(FinishReason reason, std::string_view error, StepContext& ctx) {
  for (int32_t i = 0; i < static_cast<int32_t>(choices_.size()); ++i) {
    if (choices_[static_cast<size_t>(i)].finished) continue;
    if (!error.empty()) output(i, ctx.now).error = std::string(error);
    finish_choice(i, reason, ctx);
  }
}

void RequestState::flush() {
  for (Choice& c : choices_) c.pending = -1;
  stream_->push(outbox_);
}

}  // namespace inflight
