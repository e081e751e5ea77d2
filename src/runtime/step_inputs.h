// StepInputs: the arrays of one ForwardBatch on the device, and where each lies in the single
// buffer that carries them there in one transfer (StepInputLayout, shared by every backend).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>

#include "core/tensor.h"
#include "runtime/forward_batch.h"

namespace inflight {

// The per-step inputs of a ForwardBatch on the device, uploaded in one transfer. The tensors
// view one buffer owned by the backend.
// NOTE: valid until the next upload_batch on the same backend.
struct StepInputs {
  Tensor token_ids;       // [T] i32
  Tensor positions;       // [T] i32
  Tensor slot_mapping;    // [T] i64
  Tensor query_start;     // [S + 1] i32
  Tensor context_lens;    // [S] i32
  Tensor block_tables;    // [S, max_blocks_per_seq] i32
  Tensor logits_indices;  // [L] i32
  // Host-side sizes, so that no op has to read device memory to size its launch.
  int32_t num_tokens = 0;
  int32_t num_seqs = 0;
  int32_t num_logits = 0;
  int32_t max_query_len = 0;
  int32_t max_context_len = 0;
};

// Where each array of a ForwardBatch lies in the single upload buffer: byte offsets, each
// 64-byte aligned, the i64 slot mapping first. Shared by every backend's upload_batch:
//   layout = StepInputLayout::of(batch); layout.pack(batch, staging);
//   copy staging -> device buffer (one transfer); inputs = layout.views(batch, device_buffer).
struct StepInputLayout {
  size_t slot_mapping = 0;
  size_t token_ids = 0;
  size_t positions = 0;
  size_t query_start = 0;
  size_t context_lens = 0;
  size_t block_tables = 0;
  size_t logits_indices = 0;
  size_t total_bytes = 0;

  static StepInputLayout of(const ForwardBatch& b) {
    StepInputLayout l;
    size_t at = 0;
    auto place = [&at](size_t bytes) {
      const size_t here = at;
      at += (bytes + 63) / 64 * 64;
      return here;
    };
    l.slot_mapping = place(b.slot_mapping.size() * sizeof(int64_t));
    l.token_ids = place(b.token_ids.size() * sizeof(int32_t));
    l.positions = place(b.positions.size() * sizeof(int32_t));
    l.query_start = place(b.query_start.size() * sizeof(int32_t));
    l.context_lens = place(b.context_lens.size() * sizeof(int32_t));
    l.block_tables = place(b.block_tables.size() * sizeof(int32_t));
    l.logits_indices = place(b.logits_indices.size() * sizeof(int32_t));
    l.total_bytes = std::max<size_t>(at, 64);
    return l;
  }

  // Copies the arrays into a host buffer of total_bytes (64-byte aligned).
  void pack(const ForwardBatch& b, void* dst) const {
    auto* base = static_cast<char*>(dst);
    auto put = [base](size_t off, const auto& v) {
      if (!v.empty()) std::memcpy(base + off, v.data(), v.size() * sizeof(v[0]));
    };
    put(slot_mapping, b.slot_mapping);
    put(token_ids, b.token_ids);
    put(positions, b.positions);
    put(query_start, b.query_start);
    put(context_lens, b.context_lens);
    put(block_tables, b.block_tables);
    put(logits_indices, b.logits_indices);
  }

  // Tensor views of a buffer (on `device`) that holds a packed copy of `b`.
  StepInputs views(const ForwardBatch& b, void* buffer, Device device,
                   const std::shared_ptr<void>& owner) const {
    auto* base = static_cast<char*>(buffer);
    auto view = [&](size_t off, Shape shape, DType dtype) {
      return Tensor::wrap(base + off, std::move(shape), dtype, device, owner);
    };
    const int64_t t = b.num_tokens(), s = b.num_seqs();
    StepInputs in;
    in.slot_mapping = view(slot_mapping, {t}, DType::kI64);
    in.token_ids = view(token_ids, {t}, DType::kI32);
    in.positions = view(positions, {t}, DType::kI32);
    in.query_start = view(query_start, {s + 1}, DType::kI32);
    in.context_lens = view(context_lens, {s}, DType::kI32);
    in.block_tables = view(block_tables, {s, b.max_blocks_per_seq}, DType::kI32);
    in.logits_indices =
        view(logits_indices, {static_cast<int64_t>(b.logits_indices.size())}, DType::kI32);
    in.num_tokens = b.num_tokens();
    in.num_seqs = b.num_seqs();
    in.num_logits = static_cast<int32_t>(b.logits_indices.size());
    for (int32_t i = 0; i < in.num_seqs; ++i) {
      in.max_query_len = std::max(in.max_query_len, b.query_start[i + 1] - b.query_start[i]);
      in.max_context_len = std::max(in.max_context_len, b.context_lens[i]);
    }
    return in;
  }
};

}  // namespace inflight
