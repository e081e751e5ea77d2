"""The engine's tokenizer, with Hugging Face's method names (encode, decode,
apply_chat_template)."""

from __future__ import annotations

import json
from typing import List, Optional, Union


class Tokenizer:
    def __init__(self, core):
        self._core = core

    def encode(self, text: str, add_special_tokens: bool = True) -> List[int]:
        """Special tokens written in the text are recognised, as Hugging Face tokenizers do."""
        if not isinstance(text, str):
            raise TypeError(f"text: expected str, got {type(text).__name__}")
        return self._core.encode(text, add_special_tokens)

    def decode(self, token_ids: List[int], skip_special_tokens: bool = True) -> str:
        return self._core.decode(list(token_ids), skip_special_tokens)

    def apply_chat_template(self, messages: List[dict], tools: Optional[List[dict]] = None,
                            add_generation_prompt: bool = True,
                            tokenize: bool = True) -> Union[List[int], str]:
        """The server's chat prompt for `messages`: token ids, or (tokenize=False) their text."""
        body = {"messages": messages, "add_generation_prompt": add_generation_prompt}
        if tools is not None:
            body["tools"] = tools
        ids, _ = self._core.chat_prompt(json.dumps(body))
        return ids if tokenize else self.decode(ids, skip_special_tokens=False)

    @property
    def vocab_size(self) -> int:
        return self._core.vocab_size

    @property
    def eos_token_id(self) -> int:
        return self._core.eos_token_id

    @property
    def bos_token_id(self) -> int:
        return self._core.bos_token_id
