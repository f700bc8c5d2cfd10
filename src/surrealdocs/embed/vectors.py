"""The array type every embedder returns: one float32 row per text."""

import numpy as np
import numpy.typing as npt

Vectors = npt.NDArray[np.float32]
