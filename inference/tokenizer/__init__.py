"""Text <-> tokens: chat templates, the input processor (render + tokenize + check, for every
caller), special-token splitting, incremental detokenizing and stop strings.
"""
