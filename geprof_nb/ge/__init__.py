"""The simulated GE runtime (``from geprof_nb import ge``).

Build graphs (:class:`Graph`, :func:`add_training`, :mod:`models`), run them in
a :class:`Session` after :func:`GEInitialize`, and profile them with the GE
options ``ge.exec.profilingMode`` / ``ge.exec.profilingOptions``.
"""

from . import models
from .autodiff import add_training
from .device import PRESETS as DEVICE_PRESETS
from .graph import Graph, GraphBuildError, Tensor, TensorDesc
from .session import GEFinalize, GEInitialize, Session, simulation_settings
from .status import FAILED, PARAM_INVALID, SUCCESS, GEGetErrorMsg, Status

__all__ = [
    "DEVICE_PRESETS", "FAILED", "GEFinalize", "GEGetErrorMsg", "GEInitialize", "Graph", "GraphBuildError",
    "PARAM_INVALID", "SUCCESS", "Session", "Status", "Tensor", "TensorDesc", "add_training", "models",
    "simulation_settings",
]
