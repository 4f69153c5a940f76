/* countersign's compiled verifier: skeleton (filled in by the next commits). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#ifndef COUNTERSIGN_SOURCE_SHA256
#define COUNTERSIGN_SOURCE_SHA256 "unknown"
#endif

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT, "ledger._native", "countersign's compiled verifier (see ledger/native.py).", -1, NULL,
};

PyMODINIT_FUNC PyInit__native(void) {
    PyObject *m = PyModule_Create(&native_module);
    if (m == NULL) return NULL;
    if (PyModule_AddStringConstant(m, "SOURCE_SHA256", COUNTERSIGN_SOURCE_SHA256) < 0) { Py_DECREF(m); return NULL; }
    return m;
}
