// Text Generation Inference over a Frontend, whatever the transport: POST /generate,
// POST /generate_stream and GET /info. Bodies come in as JSON text and go out as JSON.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "frontend/frontend.h"
#include "frontend/generation.h"

namespace inflight::frontend {

// Validates the request, builds its engine request and submits it; `stream` is the route's
// (/generate_stream), not the body's.
StartedGeneration start_tgi_generation(Frontend& frontend, std::string_view body, bool stream);

// TGI's /info, the fields its clients read.
nlohmann::ordered_json tgi_info(const Frontend& frontend);

}  // namespace inflight::frontend
