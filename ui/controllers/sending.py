"""Wires each chat tab's buttons to the conversation actions (send, stop, regenerate, edit
and resend, branch arrows, Continue, and the hover actions on a message), its composer's
files to the reading of documents and images, and its messages' chips to the document
dialog or the image shown large (their thumbnails from the shared cache); a reply stopped
before its first token is dropped."""

from __future__ import annotations

import weakref

from ui.services.attachments import DocumentReading, DocumentViewer, context_fit, main_sees_images
from ui.services.context import ControllerContext
from ui.services.conversation_actions import ConversationActions
from ui.widgets.chat.chat_tab import ChatTab


class SendingController:
    def __init__(self, ctx: ControllerContext) -> None:
        self.actions = ConversationActions(ctx)
        self.ctx = ctx
        self.reading = DocumentReading(ctx.gui, context_fit(ctx), main_sees_images(ctx))
        self.viewer = DocumentViewer(ctx)
        self._wired: weakref.WeakSet[ChatTab] = weakref.WeakSet()
        ctx.events.tab_opened.connect(self.attach)
        ctx.window.tab_closed.connect(ctx.pins.release)  # its documents' prefix may be evicted again
        ctx.streams.reply_finished.connect(self.actions.drop_if_blank)

    def attach(self, tab: ChatTab) -> None:
        if tab in self._wired:
            return
        self._wired.add(tab)
        a = self.actions
        tab.send_requested.connect(lambda text, documents, t=tab: a.send(t, text, documents))
        tab.composer_box.tray.extraction_requested.connect(self.reading.read)
        tab.composer_box.tray.image_requested.connect(self.viewer.show_chip_image)
        tab.composer_box.tray.thumbnail_requested.connect(self.reading.thumbnail)
        tab.document_requested.connect(lambda sha256, name, t=tab: self.viewer.show_document(t, sha256, name))
        tab.image_requested.connect(lambda sha256, name, t=tab: self.viewer.show_image(t, sha256, name))
        self.ctx.thumbnails.wire(tab.delegate, tab.view)
        tab.source_requested.connect(lambda source, t=tab: self.viewer.show_source(t, source))
        tab.stop_requested.connect(lambda t=tab: a.stop(t))
        tab.regenerate_requested.connect(lambda t=tab: a.regenerate(t))
        tab.edit_requested.connect(lambda message_id, text, t=tab: a.edit_and_resend(t, message_id, text))
        tab.branch_requested.connect(lambda message_id, step, t=tab: a.switch_branch(t, message_id, step))
        tab.continue_requested.connect(lambda t=tab: a.continue_reply(t))
        # The hover actions on a message (ui/widgets/chat/message_actions.py).
        tab.reply_edit_requested.connect(lambda message_id, text, t=tab: a.edit_reply(t, message_id, text))
        tab.delete_requested.connect(lambda message_id, confirmed, t=tab: a.delete_message(t, message_id, confirmed))
        tab.regenerate_message_requested.connect(lambda message_id, t=tab: a.regenerate(t, message_id))
        tab.branch_out_requested.connect(lambda message_id, t=tab: a.branch_out(t, message_id))
