"""Report types of the API layers and the names msprof shows for them.

``AclProfType`` (``api/acl/common/prof_api_reg.h``) and ``GeProfInfoType``
(``global_profiler.h``) are the real enumerations, value for value.  The
runtime API types and ``kRunGraph`` are geprof's own (the real runtime
registers its API names with msprof at start-up; so does ours, through
``MsprofRegTypeInfo``, which is where ``api_statistic`` gets its names).
"""

from __future__ import annotations

from enum import IntEnum

from .rawdata import ReportLevel

MSPROF_REPORT_ACL_OP_BASE_TYPE = 0x010000
MSPROF_REPORT_ACL_MODEL_BASE_TYPE = 0x020000
MSPROF_REPORT_ACL_RUNTIME_BASE_TYPE = 0x030000
MSPROF_REPORT_ACL_OTHERS_BASE_TYPE = 0x040000
MSPROF_REPORT_ACL_GRAPH_BASE_TYPE = 0x0A0000
MSPROF_REPORT_NODE_GE_API_BASE_TYPE = 0x010000
MSPROF_REPORT_NODE_HOST_OP_EXEC_TYPE = 8
MSPROF_REPORT_NODE_LAUNCH_TYPE = 5


def _sequence(start: int, names: str) -> dict[str, int]:
    return {name: start + i for i, name in enumerate(names.split(), 1)}


_ACL = {}
_ACL.update(_sequence(MSPROF_REPORT_ACL_OP_BASE_TYPE, """AclopCompile AclopCompileAndExecute
    AclopCompileAndExecuteV2 AclGenGraphAndDumpForOp OpCompile OpCompileAndDump"""))
_ACL.update(_sequence(MSPROF_REPORT_ACL_OP_BASE_TYPE + 0x008000, """AclopLoad AclopExecute AclopCreateHandle
    AclopDestroyHandle AclopExecWithHandle AclopExecuteV2 AclopCreateKernel AclopUpdateParams AclopInferShape
    AclopCast AclopCreateHandleForCast AclopCreateAttr AclopDestroyAttr"""))
_ACL.update(_sequence(MSPROF_REPORT_ACL_MODEL_BASE_TYPE, """AclmdlExecute AclmdlLoadFromMemWithQ
    AclmdlLoadFromMemWithMem AclmdlGetDesc AclmdlLoadFromFile AclmdlLoadFromFileWithMem AclmdlLoadFromMem
    AclmdlBundleLoadFromFile AclmdlBundleLoadFromMem AclmdlBundleLoadModelWithMem AclmdlBundleLoadModelWithConfig
    AclmdlBundleUnload AclmdlBundleUnloadModel AclmdlSetInputAIPP AclmdlSetAIPPByInputIndex AclmdlExecuteAsync
    AclmdlQuerySize AclmdlQuerySizeFromMem AclmdlQueryWorkspaceSize AclmdlQueryWorkspaceSizeFromMem
    AclmdlSetDynamicBatchSize AclmdlSetDynamicHWSize AclmdlSetInputDynamicDims AclmdlLoadWithConfig
    AclmdlLoadFromFileWithQ AclmdlUnload AclCreateTensorDesc AclDestroyTensorDesc AclTransTensorDescFormat"""))
_ACL.update(_sequence(MSPROF_REPORT_ACL_OTHERS_BASE_TYPE + 0x006000, """AclblasGemmEx AclblasCreateHandleForGemmEx
    AclblasCreateHandleForHgemm AclblasHgemm AclblasS8gemm AclblasCreateHandleForS8gemm AclblasGemvEx
    AclblasCreateHandleForGemvEx AclblasHgemv AclblasCreateHandleForHgemv AclblasCreateHandleForS8gemv
    AclblasS8gemv"""))
AclProfType = IntEnum("AclProfType", _ACL)
AclProfType.__doc__ = "``acl::AclProfType``: the ACL API ids (reference §6.4)."

_GE = {"kModelExecute": 1, "kModelLoad": 2, "kInputCopy": 3, "kOutputCopy": 4, "kModelLevelEnd": 5,
       "kHostOpExec": MSPROF_REPORT_NODE_HOST_OP_EXEC_TYPE}
_GE.update(_sequence(MSPROF_REPORT_NODE_GE_API_BASE_TYPE, """kInferShape kCompatibleInferShape kTiling
    kCompatibleTiling kStreamSync kStepInfo kNodeLevelEnd"""))
_GE.update(_sequence(MSPROF_REPORT_ACL_GRAPH_BASE_TYPE, """kIsGraphNeedRebuild kRemoveGraph kAddGraph kBuildGraph
    kRunGraphAsync kGEInitialize kGEFinalize kAclLevelEnd"""))
_GE["kRunGraph"] = MSPROF_REPORT_ACL_GRAPH_BASE_TYPE + 0x100  # geprof: synchronous RunGraph
GeProfInfoType = IntEnum("GeProfInfoType", _GE)
GeProfInfoType.__doc__ = ("``gert::GeProfInfoType`` (reference §6.2), plus ``kRunGraph`` for the synchronous "
                          "RunGraph (a geprof id outside the real ranges).")

#: Display names GE registers for its types (global_profiler.cc).
GE_TYPE_NAMES = {
    GeProfInfoType.kModelExecute: "ModelExecute", GeProfInfoType.kModelLoad: "ModelLoad",
    GeProfInfoType.kInputCopy: "InputCopy", GeProfInfoType.kOutputCopy: "OutputCopy",
    GeProfInfoType.kHostOpExec: "AicpuHostCompute", GeProfInfoType.kInferShape: "InferShape",
    GeProfInfoType.kCompatibleInferShape: "CompatibleInferShape", GeProfInfoType.kTiling: "Tiling",
    GeProfInfoType.kCompatibleTiling: "CompatibleTiling", GeProfInfoType.kStreamSync: "StreamSync",
    GeProfInfoType.kStepInfo: "step_info", GeProfInfoType.kIsGraphNeedRebuild: "isGraphNeedRebuild",
    GeProfInfoType.kRemoveGraph: "RemoveGraph", GeProfInfoType.kAddGraph: "AddGraph",
    GeProfInfoType.kBuildGraph: "BuildGraph", GeProfInfoType.kRunGraphAsync: "RunGraphAsync",
    GeProfInfoType.kGEInitialize: "GEInitialize", GeProfInfoType.kGEFinalize: "GEFinalize",
    GeProfInfoType.kRunGraph: "RunGraph",
}


class ExecutorEvent(IntEnum):
    """``ExecutorEvent`` of RT2 subscribers (``CannProfilerV2.on_execute_event``)."""

    kExecuteStart = 0
    kExecuteEnd = 1
    kModelStart = 2
    kModelEnd = 3


class RuntimeApiType(IntEnum):
    """Runtime API records (``runtime_api`` option), level RUNTIME."""

    rtKernelLaunch = MSPROF_REPORT_ACL_RUNTIME_BASE_TYPE + 1
    rtMemcpyAsync = MSPROF_REPORT_ACL_RUNTIME_BASE_TYPE + 2
    rtStreamSynchronize = MSPROF_REPORT_ACL_RUNTIME_BASE_TYPE + 3
    rtModelExecute = MSPROF_REPORT_ACL_RUNTIME_BASE_TYPE + 4
    rtMalloc = MSPROF_REPORT_ACL_RUNTIME_BASE_TYPE + 5


#: Launch types RT2 registers for node-level launch api records (reference §6.2).
LAUNCH_TYPE_NAMES = ("LaunchHcomKernel", "LaunchKernelWithHandle", "LaunchKernelWithFlag",
                     "AtomicLaunchKernelWithFlag", "AtomicLaunchKernelWithHandle", "AicpuLaunchTfKernel",
                     "AicpuLaunchCCKernel", "StarsTaskLaunchKernel", "LaunchFFTSPlusTask", "LaunchFFTSPlusTaskNoCopy",
                     "AicpuHostCompute", "LaunchMixKernelWithHandle", "LaunchMixKernelWithFlag", "ExecuteCustomOp")
#: Node-level launch record types: registered after GE's own node types.
LAUNCH_TYPE_BASE = MSPROF_REPORT_NODE_GE_API_BASE_TYPE + 0x100
LaunchType = IntEnum("LaunchType", {n: LAUNCH_TYPE_BASE + i for i, n in enumerate(LAUNCH_TYPE_NAMES, 1)})


def acl_api_name(api: AclProfType) -> str:
    """The API name ACL registers for an ``AclProfType`` (``PROF_TYPE_TO_NAMES``): the enumerator
    with a lower-case first letter, ``AclmdlExecute`` -> ``aclmdlExecute``."""
    return api.name[0].lower() + api.name[1:]


def type_names() -> dict[int, dict[int, str]]:
    """Every (level -> type id -> name) the runtime registers with msprof at start-up."""
    acl = {int(t): acl_api_name(t) for t in AclProfType}
    acl.update({int(t): GE_TYPE_NAMES[t] for t in GE_TYPE_NAMES if int(t) >= MSPROF_REPORT_ACL_GRAPH_BASE_TYPE})
    model = {int(t): GE_TYPE_NAMES[t] for t in (GeProfInfoType.kModelExecute, GeProfInfoType.kModelLoad,
                                                 GeProfInfoType.kInputCopy, GeProfInfoType.kOutputCopy)}
    node = {int(t): GE_TYPE_NAMES[t] for t in GE_TYPE_NAMES
            if MSPROF_REPORT_NODE_GE_API_BASE_TYPE < int(t) < MSPROF_REPORT_ACL_GRAPH_BASE_TYPE
            or t == GeProfInfoType.kHostOpExec}
    node.update({int(t): t.name for t in LaunchType})
    runtime = {int(t): t.name for t in RuntimeApiType}
    return {int(ReportLevel.ACL): acl, int(ReportLevel.MODEL): model, int(ReportLevel.NODE): node,
            int(ReportLevel.RUNTIME): runtime}
