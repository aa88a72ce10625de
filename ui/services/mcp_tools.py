"""The app's MCP servers (Settings -> Tools) and the tools each chat has on.

One McpManager for the window, made at the first server (so an app without tools never
starts its thread or imports the SDK). The servers' configurations are kept in the settings
table as the `mcpServers` JSON other apps use (MCP_SERVERS_SETTING) and started when the app
starts; every change of a server's state comes back on the GUI thread as `changed`.

Per chat, the servers it has on are kept by conversation id under CHAT_TOOLS_SETTING (off
until the user turns them on: a tool runs code on this machine). The loop's limits (output
cap, call timeout, rounds) under TOOL_SETTINGS_SETTING. Within a server that is on, a chat may
turn single tools off (CHAT_TOOLS_OFF_SETTING): a new tool of that server is on.

The tools the user answered "Always for this tool" (server and tool name) run without asking,
in every chat, until revoked in Settings -> Tools (ALWAYS_ALLOWED_SETTING); a server removed,
or changed to run something else, loses them."""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Signal

from app.tools import ServerConfig, mcp_servers_json, parse_mcp_servers
from app.tools.machine import tool_key
from app.tools.rounds import ToolRound

if TYPE_CHECKING:
    from app.tools import McpManager, McpTool, ServerState, ToolResult
    from app.tools.web import WebSettings, WebTools
    from storage import CatalogRepository
    from ui.services.threads import GuiCalls, StorageThread

MCP_SERVERS_SETTING = "mcp_servers"
CHAT_TOOLS_SETTING = "chat_tools"
CHAT_TOOL_CHOICE_SETTING = "chat_tool_choice"  # conversation id -> "required" (absent: "auto")
CHAT_TOOLS_OFF_SETTING = "chat_tools_off"  # conversation id -> ["server/tool", ...] turned off in it
TOOL_SETTINGS_SETTING = "tool_settings"
WEB_TOOLS_SETTING = "web_tools"  # {"searxng_url": str, "allow_private": bool}
WEB = "chorus"  # app.tools.web.BUILT_IN: the built-in web tools, on in a chat as a server is
ALWAYS_ALLOWED_SETTING = "tools_always_allowed"  # ["server/tool", ...]: their calls are not asked about


@dataclass(frozen=True)
class ToolSettings:
    output_cap: int = 20_000  # characters of a tool's output the model gets
    timeout_s: float = 60.0  # a call that takes longer is an error result
    max_rounds: int = 5  # model turns in one reply (the last one may not call)

    @classmethod
    def from_setting(cls, saved: object) -> ToolSettings:
        data = saved if isinstance(saved, dict) else {}
        built = cls()

        def pick(name: str, low: float, high: float) -> Any:
            value, default = data.get(name), getattr(built, name)
            ok = isinstance(value, int | float) and not isinstance(value, bool) and low <= value <= high
            return type(default)(value) if ok else default

        return cls(pick("output_cap", 200, 10_000_000), pick("timeout_s", 1, 3600), pick("max_rounds", 1, 50))


class AppTools(QObject):
    """States and tools are read on the GUI thread; calls return futures (never block)."""

    changed = Signal()  # a server's state, the server list or a chat's selection changed

    def __init__(self, catalog: CatalogRepository, storage: StorageThread, gui: GuiCalls) -> None:
        super().__init__()
        self.catalog, self.storage, self.gui = catalog, storage, gui
        self._manager: McpManager | None = None
        self._configs: dict[str, ServerConfig] = {}
        self._chat_servers: dict[int, tuple[str, ...]] = {}  # conversation id -> servers on
        self._required: set[int] = set()  # chats whose replies must begin with a call
        self._tools_off: dict[int, set[str]] = {}  # conversation id -> "server/tool" keys turned off
        self._always: set[str] = set()  # "server/tool" keys whose calls run without asking
        self.settings = ToolSettings()
        self.searxng_url, self.allow_private = "", False  # the web tools' settings
        self._web_calls = ThreadPoolExecutor(4, thread_name_prefix="web-tools")  # off the GUI thread

    # ----- start and stop -------------------------------------------------------------------

    def restore(self) -> Any:
        """Reads the saved servers and selections (storage thread), then starts the servers."""
        def load() -> tuple[object, ...]:
            get = self.catalog.get_setting
            return (get(MCP_SERVERS_SETTING), get(CHAT_TOOLS_SETTING), get(TOOL_SETTINGS_SETTING),
                    get(CHAT_TOOL_CHOICE_SETTING), get(CHAT_TOOLS_OFF_SETTING), get(ALWAYS_ALLOWED_SETTING),
                    get(WEB_TOOLS_SETTING))

        return self.storage.run(load, self._restored)

    def _restored(self, saved: tuple[object, ...]) -> None:
        servers, chats, settings, choices, off, always, web = saved
        if isinstance(web, dict):
            self.searxng_url = str(web.get("searxng_url") or "")
            self.allow_private = web.get("allow_private") is True
        self.settings = ToolSettings.from_setting(settings)
        if isinstance(always, list):
            self._always = {key for key in always if isinstance(key, str) and "/" in key}
        if isinstance(off, dict):
            self._tools_off = {int(k): {str(n) for n in v} for k, v in off.items()
                               if str(k).isdigit() and isinstance(v, list)}
        if isinstance(choices, dict):
            self._required = {int(k) for k, v in choices.items() if str(k).isdigit() and v == "required"}
        if isinstance(chats, dict):
            self._chat_servers = {int(k): tuple(str(n) for n in v) for k, v in chats.items()
                                  if str(k).isdigit() and isinstance(v, list)}
        try:
            configs = parse_mcp_servers(servers) if isinstance(servers, dict) else ()
        except ValueError:
            configs = ()  # a damaged row: no servers, and Settings shows none (the user adds them again)
        self.set_servers(configs, save=False)

    def shutdown(self) -> None:
        if self._manager is not None:
            self._manager.shutdown(timeout_s=5.0)
            self._manager = None

    def _the_manager(self) -> McpManager:
        if self._manager is None:
            from app.tools import McpManager  # the SDK, on first use

            self._manager = McpManager(output_cap=self.settings.output_cap,
                                       on_state=lambda _state: self.gui.post(self.changed.emit))
        return self._manager

    # ----- the servers ------------------------------------------------------------------------

    def configs(self) -> tuple[ServerConfig, ...]:
        return tuple(self._configs.values())

    def set_servers(self, configs: Iterable[ServerConfig], save: bool = True) -> None:
        """The whole list: servers gone are stopped, new or changed ones (re)started."""
        wanted = {c.name: c for c in configs}
        for name in list(self._configs):
            if name not in wanted and self._manager is not None:
                self._manager.stop(name)
        # An approval was given to what a server ran: gone or changed, it is not given again.
        self._revoke_servers({n for n, c in self._configs.items() if wanted.get(n) != c})
        for name, config in wanted.items():
            if self._configs.get(name) != config or self.state(name) is None:
                self._the_manager().start(config)
        self._configs = wanted
        if save:
            self._save(MCP_SERVERS_SETTING, mcp_servers_json(self._configs.values()))
        self.changed.emit()

    def add(self, config: ServerConfig) -> None:
        self.set_servers([*(c for c in self._configs.values() if c.name != config.name), config])

    def remove(self, name: str) -> None:
        self.set_servers(c for c in self._configs.values() if c.name != name)

    def restart(self, name: str) -> Future[ServerState] | None:
        config = self._configs.get(name)
        return self._the_manager().start(config) if config is not None else None

    def state(self, name: str) -> ServerState | None:
        if self._manager is None:
            return None
        try:
            return self._manager.state(name)
        except KeyError:
            return None

    def states(self) -> tuple[ServerState, ...]:
        """In the order configured; a server not started yet has no state."""
        return tuple(s for s in (self.state(n) for n in self._configs) if s is not None)

    def tools(self, servers: Iterable[str] | None = None) -> tuple[McpTool, ...]:
        """The ready servers' tools (of those named, if given)."""
        chosen = None if servers is None else set(servers)
        web = self._web().tools() if chosen and WEB in chosen else ()
        if self._manager is None:
            return web
        return web + tuple(t for t in self._manager.tools() if chosen is None or t.server in chosen)

    def set_web_settings(self, searxng_url: str, allow_private: bool) -> None:
        self.searxng_url, self.allow_private = searxng_url.strip(), allow_private
        self._save(WEB_TOOLS_SETTING, {"searxng_url": self.searxng_url, "allow_private": allow_private})
        self.changed.emit()

    def web_settings(self) -> WebSettings:
        from app.tools.web import WebSettings

        return WebSettings(searxng_url=self.searxng_url, allow_private=self.allow_private)

    def _web(self) -> WebTools:
        from app.tools.web import WebTools

        return WebTools(self.web_settings())

    def set_settings(self, settings: ToolSettings) -> None:
        self.settings = settings
        if self._manager is not None:
            self._manager.output_cap = settings.output_cap
        self._save(TOOL_SETTINGS_SETTING, asdict(settings))
        self.changed.emit()

    # ----- per chat ---------------------------------------------------------------------------

    def chat_servers(self, conversation_id: int) -> tuple[str, ...]:
        """The servers this chat has on, among those configured."""
        return tuple(n for n in self._chat_servers.get(conversation_id, ()) if n in self._configs or n == WEB)

    def set_chat_servers(self, conversation_id: int, servers: Iterable[str]) -> None:
        chosen = tuple(dict.fromkeys(servers))
        if chosen:
            self._chat_servers[conversation_id] = chosen
        else:
            self._chat_servers.pop(conversation_id, None)
        self._save(CHAT_TOOLS_SETTING, {str(k): list(v) for k, v in self._chat_servers.items()})
        self.changed.emit()

    def chat_required(self, conversation_id: int) -> bool:
        return conversation_id in self._required

    def set_chat_required(self, conversation_id: int, required: bool) -> None:
        """Whether this chat's replies must begin with a tool call (tool_choice "required")."""
        (self._required.add if required else self._required.discard)(conversation_id)
        self._save(CHAT_TOOL_CHOICE_SETTING, {str(k): "required" for k in sorted(self._required)})
        self.changed.emit()

    def chat_tools(self, conversation_id: int) -> tuple[McpTool, ...]:
        """The tools a chat's next reply is offered: its servers' that are ready, but those
        it turned off."""
        servers = self.chat_servers(conversation_id)
        off = self._tools_off.get(conversation_id, set())
        return tuple(t for t in self.tools(servers) if tool_key(t) not in off) if servers else ()

    def tool_on(self, conversation_id: int, tool: McpTool) -> bool:
        return tool_key(tool) not in self._tools_off.get(conversation_id, set())

    def set_tool_on(self, conversation_id: int, tool: McpTool, on: bool) -> None:
        """One tool of a server the chat has on, on or off in this chat alone."""
        off = self._tools_off.setdefault(conversation_id, set())
        (off.discard if on else off.add)(tool_key(tool))
        if not off:
            del self._tools_off[conversation_id]
        self._save(CHAT_TOOLS_OFF_SETTING, {str(k): sorted(v) for k, v in self._tools_off.items()})
        self.changed.emit()

    def round_for(self, conversation_id: int) -> ToolRound | None:
        """The first round of a reply in this chat, or None when it has no tool on."""
        tools = self.chat_tools(conversation_id)
        if not tools:
            return None
        from app.tools import Toolbox

        box = Toolbox(self._the_manager(), tools)
        # A required call whose schemas the grammar cannot hold is asked for, not forced.
        return ToolRound.offer(box.by_name, box.specs(), max_rounds=self.settings.max_rounds,
                               choice="required" if self.chat_required(conversation_id) else "auto")

    # ----- "Always for this tool": the tool loop's approval memory (app.tools.ApprovalMemory) --

    def always_allowed(self, tool: McpTool) -> bool:
        return tool_key(tool) in self._always

    def allowed_always(self) -> tuple[str, ...]:
        """The "server/tool" keys whose calls run without asking, in order."""
        return tuple(sorted(self._always))

    def allow_always(self, tool: McpTool) -> None:
        self._always.add(tool_key(tool))
        self._save_always()

    def revoke_always(self, key: str) -> None:
        """The tool's calls are asked about again."""
        self._always.discard(key)
        self._save_always()

    def _revoke_servers(self, names: set[str]) -> None:
        gone = {key for key in self._always if key.rsplit("/", 1)[0] in names}  # a server's name may hold "/"
        if gone:
            self._always -= gone
            self._save_always()

    def _save_always(self) -> None:
        self._save(ALWAYS_ALLOWED_SETTING, sorted(self._always))
        self.changed.emit()

    # ----- calls ------------------------------------------------------------------------------

    def submit_call(self, tool: McpTool, arguments: dict) -> Future[ToolResult]:
        if tool.server == WEB:
            return self._web_calls.submit(self._web().call, tool.name, arguments)
        return self._the_manager().submit_call(tool.server, tool.name, arguments, self.settings.timeout_s)

    def _save(self, key: str, value: object) -> None:
        self.storage.submit(self.catalog.set_setting, key, value)

