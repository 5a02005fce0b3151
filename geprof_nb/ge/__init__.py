"""The simulated GE runtime (``from geprof_nb import ge``).

Build graphs (:class:`Graph`, :func:`add_training`, :mod:`models`; ``models.llm`` with a
:class:`Parallel` split), run them in
a :class:`Session` after :func:`GEInitialize`, and profile them with the GE
options ``ge.exec.profilingMode`` / ``ge.exec.profilingOptions``.
"""

from ..prof.events import ProfDataTypeConfig, ProfilingAicoreMetrics
from ..prof.host_profiler import ProfilingEvent
from ..prof.scope import profiling_scope
from . import acl, models, mstx
from .acl import aclgrphBuildModel, aclgrphSaveModel
from .autodiff import add_training
from .device import PRESETS as DEVICE_PRESETS
from .ge_prof import (
                      aclgrphProfConfig,
                      aclgrphProfCreateConfig,
                      aclgrphProfDestroyConfig,
                      aclgrphProfFinalize,
                      aclgrphProfInit,
                      aclgrphProfStart,
                      aclgrphProfStop,
)
from .graph import Graph, Tensor
from .parallel import Parallel
from .serving import Request, ServeResult, requests, serve
from .session import GEFinalize, GEInitialize, Session, simulation_settings
from .status import FAILED, PARAM_INVALID, SUCCESS, GEGetErrorMsg, Status
from .tensor import GraphBuildError, TensorDesc

__all__ = [
    "DEVICE_PRESETS", "FAILED", "GEFinalize", "GEGetErrorMsg", "GEInitialize", "Graph", "GraphBuildError",
    "PARAM_INVALID", "Parallel", "ProfDataTypeConfig", "ProfilingAicoreMetrics", "ProfilingEvent", "SUCCESS", "Session",
    "Status", "Tensor", "TensorDesc", "acl", "aclgrphBuildModel", "aclgrphProfConfig", "aclgrphProfCreateConfig",
    "aclgrphProfDestroyConfig", "aclgrphProfFinalize", "aclgrphProfInit", "aclgrphProfStart", "aclgrphProfStop",
    "Request", "ServeResult", "aclgrphSaveModel", "add_training", "models", "mstx", "profiling_scope", "requests",
    "serve", "simulation_settings",
]
