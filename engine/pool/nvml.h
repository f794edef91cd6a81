/* nvml.h - the few NVML calls the pool makes, resolved at run time with
 * dlopen: no NVML header or library is needed to build, and a machine
 * without the NVIDIA driver simply has none */
#ifndef DLH_NVML_H
#define DLH_NVML_H

#include <stddef.h>

#define DLH_NVML_LIB "libnvidia-ml.so.1"   /* the driver's NVML, by soname */
#define DLH_NVML_NAME_MAX 96               /* NVML_DEVICE_NAME_V2_BUFFER_SIZE */

/* nvmlMemory_t (version 1): bytes. */
struct dlh_nvml_memory {
	unsigned long long total;     /* installed memory */
	unsigned long long free;      /* unallocated */
	unsigned long long used;      /* allocated */
};

/* The entry points used, with NVML's signatures: every call returns an
 * nvmlReturn_t, 0 = NVML_SUCCESS; a device is an opaque nvmlDevice_t. */
struct dlh_nvml {
	void *lib;                                             /* dlopen handle; NULL for fakes */
	int (*init)(void);                                     /* nvmlInit_v2 */
	int (*shutdown)(void);                                 /* nvmlShutdown */
	int (*count)(unsigned int *n);                         /* nvmlDeviceGetCount_v2 */
	int (*handle)(unsigned int i, void **dev);             /* nvmlDeviceGetHandleByIndex_v2 */
	int (*name)(void *dev, char *name, unsigned int len);  /* nvmlDeviceGetName */
	int (*memory)(void *dev, struct dlh_nvml_memory *m);   /* nvmlDeviceGetMemoryInfo */
	int (*power_limit)(void *dev, unsigned int *mw);       /* nvmlDeviceGetPowerManagementLimit */
};

/* Loads library (DLH_NVML_LIB) and resolves the entry points, without
 * calling nvmlInit. Returns 0, -ENOENT when the library cannot be loaded,
 * or -ENOSYS when it lacks an entry point. */
int dlh_nvml_open(struct dlh_nvml *n, const char *library);

/* Unloads what dlh_nvml_open loaded. */
void dlh_nvml_close(struct dlh_nvml *n);

#endif
