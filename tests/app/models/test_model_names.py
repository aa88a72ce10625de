"""Model names as the picker shows them (app/models/names.py)."""

import pytest

from app.models.names import ModelTitle, model_title


@pytest.mark.parametrize(("file_name", "title"), [
    ("SmolLM2-135M-Instruct.Q4_1.gguf", ModelTitle("SmolLM2 135M Instruct", "Q4_1")),
    ("Qwen2.5-0.5B-Instruct-Q4_K_M.gguf", ModelTitle("Qwen2.5 0.5B Instruct", "Q4_K_M")),
    ("gemma-3-270m-it-Q8_0.gguf", ModelTitle("gemma 3 270m it", "Q8_0")),
    ("Llama-3.3-70B-Instruct-Q4_K_M-00001-of-00002.gguf", ModelTitle("Llama 3.3 70B Instruct", "Q4_K_M")),
    ("model-f16.gguf", ModelTitle("model", "F16")),
    ("Qwen3-8B-UD-Q4_K_XL.gguf", ModelTitle("Qwen3 8B", "UD-Q4_K_XL")),
    ("main.gguf", ModelTitle("main")),
    ("my_model.bin", ModelTitle("my model.bin")),
])
def test_a_file_name_reads_as_the_models_name_and_its_quantisation(file_name, title):
    assert model_title(file_name) == title
