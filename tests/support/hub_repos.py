"""Names of the stand-in Hub's repositories and files (tests/support/hub_fixtures.py serves them)."""

SMOL_REPO = "chorus-test/SmolLM2-135M-Instruct-GGUF"
GEMMA_REPO = "chorus-test/gemma-3-270m-it-GGUF"
GATED_REPO = "chorus-test/gated-gemma-3-270m-GGUF"
TAMPERED_REPO = "chorus-test/tampered-SmolLM2-GGUF"
SMOL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA_FILE = "gemma-3-270m-q4_k_m.gguf"
SPLIT_DIR = "Q4_1-split"
SPLIT_PREFIX = "SmolLM2-135M-Instruct-Q4_1"
# The same Gemma bytes under two quant names: the second file's estimate comes from the first's header.
QUANTS_REPO = "chorus-test/gemma-3-270m-quants-GGUF"
QUANT_FILES = ("gemma-3-270m-it-Q4_K_M.gguf", "gemma-3-270m-it-Q5_K_M.gguf")
# A vision model: two quants (the SmolLM2 bytes under SmolVLM names) and two projectors.
VISION_REPO = "chorus-test/SmolVLM-test-GGUF"
VISION_FILES = ("SmolVLM-test-Q4_1.gguf", "SmolVLM-test-Q8_0.gguf")
VISION_PROJECTORS = ("mmproj-SmolVLM-test-Q8_0.gguf", "mmproj-SmolVLM-test-f16.gguf")
