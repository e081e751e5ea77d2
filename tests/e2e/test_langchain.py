"""LangChain's OpenAI chat model against the server: structured output (JSON schema and function
calling) and bound tools, as agent frameworks use them."""

import pytest

from conftest import SERVED_NAME

pydantic = pytest.importorskip("pydantic")
langchain_openai = pytest.importorskip("langchain_openai", reason="skipped: langchain-openai "
                                       "not installed")


class City(pydantic.BaseModel):
    """A city and the country it lies in."""
    name: str
    country: str
    population_millions: float


def chat_model(base_url, **kwargs):
    return langchain_openai.ChatOpenAI(base_url=base_url + "/v1", api_key="unused",
                                       model=SERVED_NAME, temperature=0, max_retries=0,
                                       timeout=120, **kwargs)


@pytest.mark.parametrize("method", ["json_schema", "function_calling", "json_mode"])
def test_with_structured_output(base_url, method):
    llm = chat_model(base_url, max_tokens=96)
    prompt = "Paris is in France and has 2.1 million people. Give its city record."
    if method == "json_mode":
        prompt += " Answer in JSON with keys name, country and population_millions."
    structured = llm.with_structured_output(City, method=method)
    city = structured.invoke(prompt)
    assert isinstance(city, City)
    assert city.name and city.country  # the tiny model's answer need not be right


def test_bind_tools_forced_and_named(base_url):
    def get_weather(city: str, unit: str) -> str:
        """The current weather in a city, in celsius or fahrenheit."""
        return "sunny"

    llm = chat_model(base_url, max_tokens=64)
    for choice in ("get_weather", "required"):
        message = llm.bind_tools([get_weather], tool_choice=choice).invoke(
            "What is the weather in Paris?")
        assert message.tool_calls, message
        call = message.tool_calls[0]
        assert call["name"] == "get_weather"
        assert set(call["args"]) == {"city", "unit"}
