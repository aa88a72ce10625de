"""A conversation's use-cases, Qt-free: what the window and the terminal both do to one."""

from app.conversations.open import OpenConversations
from app.conversations.prompt import PromptBuilder, chat_sampling, prompt_content, reply_request, round_in
from app.conversations.session import ConversationSession, ReplyStart, cut_short

__all__ = ["ConversationSession", "OpenConversations", "PromptBuilder", "ReplyStart", "chat_sampling",
           "cut_short", "prompt_content", "reply_request", "round_in"]
