// The OpenAI API over a Frontend, whatever the transport: POST /v1/completions,
// POST /v1/chat/completions, GET /v1/models (and /v1/models/{id}). Bodies come in as JSON text
// and go out as JSON; failures are ApiError (error_mapping.h for everything else).
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "frontend/frontend.h"
#include "frontend/generation.h"

namespace inflight::frontend {

// Validates the request, builds its engine requests (one per prompt) and submits them.
StartedGeneration start_completion(Frontend& frontend, std::string_view body);
StartedGeneration start_chat_completion(Frontend& frontend, std::string_view body);

// {"object": "list", "data": [model_card...]}: a card per name (served name, then aliases) of
// every loaded model.
nlohmann::ordered_json model_list(const std::vector<std::shared_ptr<Frontend>>& frontends);
// A loaded model under `id` (its served name when empty): id, created, owned_by, root (the
// served name), max_model_len.
nlohmann::ordered_json model_card(const Frontend& frontend, std::string_view id = {});

}  // namespace inflight::frontend
