// Text Generation Inference over a Frontend, whatever the transport: POST /generate,
// POST /generate_stream and GET /info. Bodies come in as JSON text and go out as JSON.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "frontend/frontend.h"
#include "frontend/generation.h"

namespace inflight::frontend {

// Which TGI route a generation came in by.
enum class TgiRoute {
  kGenerate,        // POST /generate: one JSON object
  kGenerateStream,  // POST /generate_stream: Server-Sent Events
  kCompat,          // POST /: the body's "stream" (default false) picks SSE or, as TGI answers
                    // it, a JSON array holding the one /generate object
};

// Validates the request, builds its engine request and submits it.
StartedGeneration start_tgi_generation(Frontend& frontend, std::string_view body, TgiRoute route);

// TGI's /info, the fields its clients read.
nlohmann::ordered_json tgi_info(const Frontend& frontend);

}  // namespace inflight::frontend
