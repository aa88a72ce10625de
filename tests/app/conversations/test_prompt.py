"""The prompt a chat's reply is sent with (app/conversations/prompt.py), built from a real
SQLite file's branch without a model: the system prompt and the documents in one system
message, a reply's reasoning and an errored reply left out, a tool round's calls and results
and the tools described after the system prompt, before the documents (one place, so that
chats with different documents share the tool list's KV), the request's fields; and the documents' room
is the engine's own reply_room, so a prompt sized here is never cut by the engine for the
reply's sake. Tokens are counted as words, a stand-in for the vocabulary."""

from __future__ import annotations

import hashlib

from app.conversations import ConversationSession, PromptBuilder, chat_sampling, reply_request, round_in
from app.documents import split_chunks
from app.documents.prompt import TOKENS_PER_TURN
from app.tools import call_records, result_content, result_record
from app.tools.mcp_results import McpTool, ToolResult
from app.tools.rounds import ToolRound
from app.tools.types import Tool, ToolCall
from inference import PRIORITY_TAB, SamplingParams, reply_room
from storage import DocumentRepository, MessageStatus, NewDocument

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}
ADD = McpTool("test", "add", "Add two numbers", SCHEMA)


class WordTokens:
    """One token a word: budgets exact in a test."""

    exact = True

    def count(self, text: str) -> int:
        return len(text.split())


def document(name: str, words: int) -> NewDocument:
    text = " ".join(f"w{i}" for i in range(words))
    return NewDocument(sha256=hashlib.sha256(text.encode()).hexdigest(), name=name, mime="text/plain",
                       size_bytes=len(text.encode()), text=text, pages=None, chunks=split_chunks(text, (), 300))


def builder(repo, n_ctx: int | None = 8192, asked: list | None = None) -> PromptBuilder:
    def tokens():
        if asked is not None:
            asked.append(True)
        return WordTokens(), n_ctx

    return PromptBuilder(DocumentRepository(repo.db), tokens)


def tool_round() -> ToolRound:
    first = ToolRound.offer({"add": ADD}, [Tool("add", ADD.description, SCHEMA)], choice="required")
    assert first is not None
    return first


def test_the_system_prompt_and_the_documents_open_the_prompt_as_one_pinned_system_message(repo):
    session, started = ConversationSession.start(repo, "What does the manual say?", [document("manual.txt", 200)],
                                                 system="Answer briefly.", model="m")
    prompt = builder(repo).prompt(started.path, started.reply, SamplingParams())

    system, question = prompt.messages
    assert system["role"] == "system" and system["content"].startswith("Answer briefly.\n\n")
    assert '<document name="manual.txt">' in system["content"] and "w199" in system["content"]
    assert question == {"role": "user", "content": "What does the manual say?"}
    assert prompt.pinned_block == system["content"] and not prompt.retrieval
    assert [d.name for d in prompt.documents] == ["manual.txt"]


def test_a_chat_without_documents_never_asks_the_engine_for_token_counts(repo):
    session, started = ConversationSession.start(repo, "Hello", model="m")
    asked: list = []
    prompt = builder(repo, asked=asked).prompt(started.path, started.reply, SamplingParams())
    assert prompt.messages == ({"role": "user", "content": "Hello"},) and asked == []


def test_reasoning_and_errored_replies_stay_out_and_a_continued_reply_keeps_all_it_wrote(repo):
    session, first = ConversationSession.start(repo, "2+2?", model="m")
    repo.finish_reply(first.reply.id, "<think>add them</think>4")
    failed = session.send("3+3?")
    repo.finish_reply(failed.reply.id, "6 bu", status=MessageStatus.ERROR, error_text="engine gone")
    again = session.send("3+3, again?")
    prompt = builder(repo).prompt(again.path, again.reply, SamplingParams())
    assert [(m["role"], m["content"]) for m in prompt.messages] == [("user", "2+2?"), ("assistant", "4"),
                                                                    ("user", "3+3?"), ("user", "3+3, again?")]

    repo.finish_reply(again.reply.id, "<think>hm</think>6")
    resumed = session.continue_reply()
    assert resumed is not None
    continued = builder(repo).prompt(resumed.path, resumed.reply, SamplingParams(), continued=True)
    assert continued.messages[-1] == {"role": "assistant", "content": "<think>hm</think>6"}


def test_a_tool_rounds_next_turn_carries_the_call_and_its_result_and_the_tools_before_the_documents(repo):
    session, started = ConversationSession.start(repo, "Add 2 and 3 from the sheet", [document("sheet.txt", 50)],
                                                 system="Be exact.", model="m")
    call = ToolCall("call_1", "add", '{"a": 2, "b": 3}')
    repo.finish_reply(started.reply.id, "")
    repo.set_tool_calls(started.reply.id, call_records([call]))
    result = ToolResult("5", is_error=False, duration_s=0.01)
    tool = repo.add_message(session.conversation_id, "tool", result_content(result), parent_id=started.reply.id,
                            tool_result=result_record(call, result))
    first = tool_round()
    next_turn = session.reply_after(tool.id)
    tools = round_in(first, next_turn.path, continued=False)
    assert tools is not None and tools.round == 1  # one turn of calls along the branch

    prompt = builder(repo).prompt(next_turn.path, next_turn.reply, SamplingParams(), tools=tools)
    system = prompt.messages[0]["content"]
    assert system.startswith("Be exact.") and system.index('"add"') < system.index("<document")
    text = "\n".join(str(m["content"]) for m in prompt.messages[1:])
    assert '"a": 2' in text and "5" in text  # the call as written and its result, as plain turns
    assert prompt.messages[1] == {"role": "user", "content": "Add 2 and 3 from the sheet"}

    request = reply_request(prompt, SamplingParams(temperature=0.5), priority=PRIORITY_TAB, request_id="r1",
                            tools=tools, overflow="drop_oldest")
    assert request.messages == prompt.messages and request.request_id == "r1" and request.overflow == "drop_oldest"
    assert request.sampling.temperature == 0.5 and not request.continue_final


def test_chats_with_different_documents_begin_with_the_same_system_prompt_and_tool_list(repo):
    """The tool list at one stable place: what two chats on the same servers share ends after
    it, so the engine computes a long tool list once for every tab (before, the documents
    came first and each chat's tool list was computed again)."""
    prompts = []
    for name in ("a.txt", "b.txt"):
        session, started = ConversationSession.start(repo, "What is in it?", [document(name, 40)],
                                                     system="Be exact.", model="m")
        prompts.append(builder(repo).prompt(started.path, started.reply, SamplingParams(), tools=tool_round()))
    first, second = (p.messages[0]["content"] for p in prompts)
    shared = first[:first.index("<document")]
    assert second.startswith(shared) and '"add"' in shared and shared.startswith("Be exact.")


def test_the_documents_room_counts_the_tool_list(repo):
    """A document is sized to the context less the reply's room and the turns, the tools'
    description among them: a document that fills the room of a chat without tools goes to
    excerpts when the tools take part of it (before, it went in whole and the prompt, tools
    added after the sizing, passed the context)."""
    n_ctx, max_tokens = 2000, 100
    room = reply_room(n_ctx, max_tokens)
    words = n_ctx - room - (WordTokens().count("Sum it") + TOKENS_PER_TURN) - TOKENS_PER_TURN - 3
    assert whole_fits(repo, words, n_ctx, max_tokens)  # without tools it fits exactly
    session, started = ConversationSession.start(repo, "Sum it", [document("sheet.txt", words)], model="m")
    prompt = builder(repo, n_ctx=n_ctx).prompt(started.path, started.reply, SamplingParams(max_tokens=max_tokens),
                                               tools=tool_round())
    used = sum(WordTokens().count(str(m["content"])) + TOKENS_PER_TURN for m in prompt.messages)
    assert prompt.retrieval and used <= n_ctx - room


def test_a_required_calls_first_turn_is_forced_by_its_grammar_in_the_request(repo):
    session, started = ConversationSession.start(repo, "Add 2 and 3", model="m")
    first = round_in(tool_round(), started.path, continued=False)
    assert first is not None and first.round == 0
    prompt = builder(repo).prompt(started.path, started.reply, SamplingParams(), tools=first)
    request = reply_request(prompt, SamplingParams(), priority=PRIORITY_TAB, tools=first, continued=True)
    assert request.sampling.grammar and request.continue_final


def test_the_chats_own_settings_go_over_the_apps(repo):
    sampling = chat_sampling(SamplingParams(temperature=0.7, max_tokens=512), {"max_tokens": 64, "overflow": "stop"})
    assert (sampling.temperature, sampling.max_tokens) == (0.7, 64)


def whole_fits(repo, words: int, n_ctx: int, max_tokens: int) -> bool:
    session, started = ConversationSession.start(repo, "Summarize it", [document("d.txt", words)], model="m")
    prompt = builder(repo, n_ctx).prompt(started.path, started.reply, SamplingParams(max_tokens=max_tokens))
    return not prompt.retrieval


def test_documents_are_sized_by_the_engines_reply_room_and_what_fits_leaves_it(repo):
    """The engine keeps reply_room(n_ctx, max_tokens) for the reply when it fits a chat; the
    documents' budget is the context less that room, the turns and their markup, no more
    and no less. The old rule (at least 256, up to half the context) sent a document to
    excerpts that the engine would have taken whole."""
    n_ctx = 1000
    for max_tokens in (100, 2000, -1):
        room = reply_room(n_ctx, max_tokens)
        turns = WordTokens().count("Summarize it") + TOKENS_PER_TURN
        budget = n_ctx - room - turns - TOKENS_PER_TURN
        rendered = 3  # the document's tags count as words: '<document', 'name="d.txt">', '</document>'
        assert whole_fits(repo, budget - rendered, n_ctx, max_tokens)
        assert not whole_fits(repo, budget - rendered + 1, n_ctx, max_tokens)
    # a 100-token reply in a 1000-token context: the engine keeps 100 tokens, not 256
    assert whole_fits(repo, 800, n_ctx, 100)
