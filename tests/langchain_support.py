"""Builders for the LangChain / LangGraph adapter's tests: a policy, a roster with tokens, and a
chat model that plays a script of tool calls (no network)."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

POLICY_TEXT = """
policy "langchain-test"
default ask "No rule covers this tool."
group sups = ["sup-1", "sup-2", "sup-3"]

allow lookup
deny delete_account reason "Accounts are closed by support, never by the agent."

ask refund
  reason "A person checks refunds."
  decisions approve, edit, reject, respond
  timeout 1h
  id "refund"

ask notify
  reason "A person checks notices."
  decisions approve, reject
  remember session
  timeout 1h
  id "notify"

ask wire
  reason "Two supervisors check wires."
  approvers 2 from sups
  decisions approve, reject
  timeout 4h
  id "wire"
"""


class ScriptedChatModel(BaseChatModel):
    """Answers turn N (the number of AI messages already in the conversation) with `script[N]`:
    an AIMessage, usually with tool calls. Replaying a turn gives the same answer."""

    script: list[AIMessage]

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> "ScriptedChatModel":
        return self

    def _generate(self, messages: list[BaseMessage], stop=None, run_manager=None, **kwargs: Any) -> ChatResult:
        turn = sum(isinstance(m, AIMessage) for m in messages)
        message = self.script[min(turn, len(self.script) - 1)]
        return ChatResult(generations=[ChatGeneration(message=message.model_copy())])


def calls(*items: tuple[str, str, dict]) -> AIMessage:
    """An AI turn calling tools: (call id, tool, args) each."""
    return AIMessage(content="", tool_calls=[{"id": i, "name": n, "args": a, "type": "tool_call"} for i, n, a in items])


def done(text: str = "All done.") -> AIMessage:
    return AIMessage(content=text)
