// The one mapping from internal failures to API errors: a failure answers alike whether a route
// throws it (inflight::Error) or the engine returns it (Status), and a 500 never shows the
// client where the code failed.
#include "frontend/error_mapping.h"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "frontend/frontend.h"
#include "frontend/openai_api.h"
#include "frontend/prompt_builder.h"
#include "test_data.h"
#include "tokenizer/tokenizer.h"

namespace inflight::frontend {
namespace {

// The API error of what `f` throws, as a route's caller maps it.
template <typename F>
ApiError caught(F f) {
  try {
    f();
  } catch (...) {
    return current_api_error("test");
  }
  ADD_FAILURE() << "nothing was thrown";
  return ApiError(0, "");
}

TEST(ErrorMapping, StatusTable) {
  struct Row {
    StatusCode code;
    int status;
    std::string type;
  };
  const Row rows[] = {{StatusCode::kInvalidArgument, 400, "BadRequestError"},
                      {StatusCode::kResourceExhausted, 400, "BadRequestError"},
                      {StatusCode::kUnsupported, 400, "BadRequestError"},
                      {StatusCode::kNotFound, 404, "NotFoundError"},
                      {StatusCode::kUnavailable, 503, "ServiceUnavailableError"},
                      {StatusCode::kInternal, 500, "InternalServerError"}};
  for (const Row& row : rows) {
    const ApiError e = api_error_from(Status(row.code, "what went wrong"));
    EXPECT_EQ(e.status(), row.status) << status_code_name(row.code);
    EXPECT_EQ(e.type(), row.type) << status_code_name(row.code);
    if (row.status != 500) {
      EXPECT_STREQ(e.what(), "what went wrong");
    }
  }
}

TEST(ErrorMapping, ThrownErrorAnswersAsTheEngineStatusOfItsCode) {
  for (ErrorCode code : {ErrorCode::kInvalidArgument, ErrorCode::kInvalidFile,
                         ErrorCode::kUnsupported, ErrorCode::kOutOfMemory, ErrorCode::kNotFound,
                         ErrorCode::kInternal}) {
    const ApiError thrown = caught([code] { INFLIGHT_THROW(code, "failure {}", 1); });
    const ApiError returned = api_error_from(Status(status_code_of(code), "failure 1"));
    EXPECT_EQ(thrown.status(), returned.status()) << static_cast<int>(code);
    EXPECT_STREQ(thrown.type(), returned.type()) << static_cast<int>(code);
  }
  EXPECT_EQ(caught([] { INFLIGHT_THROW(ErrorCode::kUnsupported, "no"); }).status(), 400);
  EXPECT_EQ(caught([] { INFLIGHT_THROW(ErrorCode::kOutOfMemory, "no"); }).status(), 400);
}

TEST(ErrorMapping, InternalDetailsStayInTheLog) {
  const ApiError check = caught([] { INFLIGHT_CHECK(1 + 1 == 3, "broken invariant {}", 42); });
  const ApiError status = api_error_from(
      Status(StatusCode::kInternal, "device step failed (src/engine/engine_loop.cc:58)"));
  const ApiError other = caught([] { throw std::runtime_error("vector::_M_range_check"); });
  for (const ApiError* e : {&check, &status, &other}) {
    EXPECT_EQ(e->status(), 500);
    EXPECT_STREQ(e->type(), "InternalServerError");
    EXPECT_STREQ(e->what(), "internal server error");
  }
}

// Error::what() ends with the source location of the check, for the log; a client sees only
// message(), on every class a client is told about.
TEST(ErrorMapping, ClientMessagesCarryNoSourceLocation) {
  try {
    INFLIGHT_THROW(ErrorCode::kInvalidArgument, "bad value {}", 7);
  } catch (const Error& e) {
    EXPECT_EQ(e.message(), "bad value 7");
    EXPECT_NE(std::string(e.what()).find("error_mapping_test.cc:"), std::string::npos) << e.what();
  }
  for (ErrorCode code : {ErrorCode::kInvalidArgument, ErrorCode::kInvalidFile,
                         ErrorCode::kUnsupported, ErrorCode::kOutOfMemory, ErrorCode::kNotFound}) {
    const ApiError e = caught([code] { INFLIGHT_THROW(code, "the value is wrong"); });
    EXPECT_STREQ(e.what(), "the value is wrong") << static_cast<int>(code);
  }
}

// A request that failed inside the engine (FinishReason::kError) answers a 500 whose detail
// (the engine's error, with its source location) goes to the log only.
TEST(ErrorMapping, EngineFailuresAreInternalErrors) {
  const ApiError e =
      engine_failure_error("the model computed a non-finite logit (src/engine/sampler.cc:50)");
  EXPECT_EQ(e.status(), 500);
  EXPECT_STREQ(e.type(), "InternalServerError");
  EXPECT_STREQ(e.what(), "internal server error");
  EXPECT_EQ(engine_failure_error("").status(), 500);
}

TEST(ErrorMapping, ApiErrorPassesThrough) {
  const ApiError e = caught([] { throw ApiError(429, "busy", "n"); });
  EXPECT_EQ(e.status(), 429);
  EXPECT_STREQ(e.what(), "busy");
  EXPECT_EQ(e.param(), "n");
}

class PromptErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    INFLIGHT_REQUIRE_MODEL(path);
    auto model = std::make_shared<LoadedModel>();
    model->tokenizer = Tokenizer::from_path(path);
    model->max_model_len = 64;
    // An engine vocabulary larger than the tokenizer's (padded embedding rows): ids past the
    // tokenizer's pass validation and reach it.
    model->limits.vocab_size = model->tokenizer->vocab_size() + 128;
    frontend_.load(std::move(model));
  }

  Frontend frontend_{FrontendOptions{"m"}};
};

TEST_F(PromptErrors, ContextLengthIsCheckedWhereEngineRequestsAreBuilt) {
  const LoadedModel& model = frontend_.model();
  SamplingParams sampling;
  PromptInput fits{"", std::vector<int32_t>(10, 1)};
  EXPECT_EQ(build_engine_request(model, fits, true, sampling).prompt_token_ids.size(), 10u);

  PromptInput whole{"", std::vector<int32_t>(64, 1)};
  ApiError e = caught([&] { build_engine_request(model, whole, true, sampling); });
  EXPECT_EQ(e.status(), 400);
  EXPECT_EQ(e.param(), "messages");

  sampling.max_tokens = 60;
  e = caught([&] { build_engine_request(model, fits, true, sampling); });
  EXPECT_EQ(e.status(), 400);
  EXPECT_EQ(e.param(), "max_tokens");
  EXPECT_NE(std::string(e.what()).find("maximum context length is 64"), std::string::npos);
}

}  // namespace
}  // namespace inflight::frontend
