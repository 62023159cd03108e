"""Shared test set-up."""

import torch

# One intra-op thread: the tests' networks are tiny, and on a 2-core machine where Crafter steps in the
# same process, torch's second thread only fights the env for the core (measured 10-40x slower updates).
torch.set_num_threads(1)
