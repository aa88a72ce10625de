"""What the window's controllers use: the Qt-side services, built once and shared.

A service here does work for the controllers (ui/controllers/) without wiring any widget's
signals to actions itself: the hops to the storage thread and back to the GUI thread
(threads, worker_hops, daemon_pool), the shared context the composition root builds
(context), the engine hub's signals (engine_signals), the per-frame presenter of streaming
replies (stream_presenter), what a user does to one conversation (conversation_actions),
reading a comparison (compare_review), Hub downloads (downloads), the window's saved state
(window_state). A service may use widgets and app/ services; it never imports a
controller, and controllers talk to each other only through the context's services and the
window's signals.
"""
