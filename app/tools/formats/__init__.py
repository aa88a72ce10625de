"""Tool formats: how a model writes its calls, chosen by its chat template's source. A
template that reads `tools` and has a known family's markers gets that family's native
format (hermes: Qwen 2.5/3, Hermes; llama3; mistral); any other (SmolLM2's ChatML, Gemma)
gets the generic one."""

from __future__ import annotations

from app.tools.formats.base import ToolFormat
from app.tools.formats.generic import GenericFormat
from app.tools.formats.hermes import HermesFormat
from app.tools.formats.llama3 import Llama3Format
from app.tools.formats.mistral import MistralFormat
from inference import EngineClient, template_supports_tools

GENERIC = GenericFormat()
NATIVE: tuple[ToolFormat, ...] = (MistralFormat(), HermesFormat(), Llama3Format())  # the first that detects


def format_for_template(source: str | None) -> ToolFormat:
    """The tool format of a chat template; generic when its source is unknown (None)."""
    if not source or not template_supports_tools(source):
        return GENERIC
    return next((f for f in NATIVE if f.detects(source)), GENERIC)


def format_of_engine(engine: EngineClient) -> ToolFormat:
    """The tool format of an engine's model: a local engine tells its template (ModelInfo);
    another (a remote server's) gets the generic format."""
    info = engine.info
    return format_for_template(info.chat_template if info is not None else None)


__all__ = ["GENERIC", "NATIVE", "GenericFormat", "HermesFormat", "Llama3Format", "MistralFormat", "ToolFormat",
           "format_for_template", "format_of_engine"]
