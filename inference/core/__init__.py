"""The engine's core: the thread that owns the llama context (engine), one synchronous step
(engine_core: schedule -> execute -> postprocess), request handles and the delta router,
the output processor (detokenize, stop strings, deltas) and the metrics.
"""
