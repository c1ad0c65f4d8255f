"""libtandem_feed.so (python/src/capi.h) loaded with ctypes: every call's signature, the
C API version check, and how its errors become Python's (ValueError for a bad setting,
RuntimeError for a feed that cannot go on)."""
import ctypes
import os

_CAPI_VERSION = 4
_VALUE_ERROR = 1


def _load():
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.environ.get("TANDEM_FEED_LIBRARY") or os.path.join(here, "libtandem_feed.so")
    if not os.path.exists(path):
        raise ImportError(f"tandem: {path} is missing: build tandem (scripts/setup) and put build/python on "
                          "PYTHONPATH, or pip install the wheel (scripts/wheel)")
    lib = ctypes.CDLL(path)
    sig = {
        "tandem_capi_version": ([], ctypes.c_int),
        "tandem_version": ([], ctypes.c_char_p),
        "tandem_error_kind": ([], ctypes.c_int),
        "tandem_error_message": ([], ctypes.c_char_p),
        "tandem_init": ([], None),
        "tandem_setting_names": ([], ctypes.c_char_p),
        "tandem_set_log_level": ([ctypes.c_char_p], ctypes.c_int),
        "tandem_shutdown_workers": ([ctypes.c_char_p], ctypes.c_int),
        "tandem_plan_begin": ([ctypes.c_char_p], ctypes.c_void_p),
        "tandem_task_wait": ([ctypes.c_void_p, ctypes.c_double], ctypes.c_int),
        "tandem_task_result": ([ctypes.c_void_p], ctypes.c_char_p),
        "tandem_task_free": ([ctypes.c_void_p], None),
        "tandem_feed_open": ([ctypes.c_char_p], ctypes.c_void_p),
        "tandem_feed_wait_started": ([ctypes.c_void_p, ctypes.c_double], ctypes.c_int),
        "tandem_feed_info": ([ctypes.c_void_p], ctypes.c_char_p),
        "tandem_feed_next": ([ctypes.c_void_p, ctypes.c_double, ctypes.POINTER(ctypes.c_void_p)], ctypes.c_int),
        "tandem_feed_close": ([ctypes.c_void_p], ctypes.c_int),
        "tandem_feed_end": ([ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int], ctypes.c_int),
        "tandem_feed_log": ([ctypes.c_void_p, ctypes.c_char_p, ctypes.c_double], ctypes.c_int),
        "tandem_feed_shutdown": ([ctypes.c_void_p], ctypes.c_int),
        "tandem_feed_stats": ([ctypes.c_void_p], ctypes.c_char_p),
        "tandem_feed_state": ([ctypes.c_void_p, ctypes.c_ulonglong], ctypes.c_char_p),
        "tandem_feed_keep_workers": ([ctypes.c_void_p], None),
        "tandem_feed_free": ([ctypes.c_void_p], None),
        "tandem_batch_json": ([ctypes.c_void_p], ctypes.c_char_p),
        "tandem_batch_free": ([ctypes.c_void_p], None),
        "tandem_use_buffer_pool": ([ctypes.c_int], None),
        "tandem_buffer_pool_stats": ([], ctypes.c_char_p),
    }
    for name, (args, result) in sig.items():
        f = getattr(lib, name)
        f.argtypes, f.restype = args, result
    if lib.tandem_capi_version() != _CAPI_VERSION:
        raise ImportError(f"tandem: {path} speaks C API {lib.tandem_capi_version()}, this package {_CAPI_VERSION}: "
                          "the library and the Python files come from different builds; reinstall tandem")
    lib.tandem_init()
    return lib


_lib = _load()


def _raise():
    message = (_lib.tandem_error_message() or b"").decode("utf-8", "replace")
    raise (ValueError if _lib.tandem_error_kind() == _VALUE_ERROR else RuntimeError)(message)
