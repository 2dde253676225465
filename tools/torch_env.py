"""Shared set-up of the fixture generators in tools/: a fixed thread count, deterministic torch
kernels, and quiet Transformers (no warnings, no progress bars), so that a rerun writes the same
fixture files."""
import torch
import transformers


def setup_torch(threads: int) -> None:
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    transformers.logging.set_verbosity_error()
    try:
        from transformers.utils import logging as hf_logging
        hf_logging.disable_progress_bar()
    except Exception:
        pass
