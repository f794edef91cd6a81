/* nvml.c - NVML resolved at run time with dlopen (see nvml.h) */
#include "engine/pool/nvml.h"

#include <dlfcn.h>
#include <errno.h>
#include <string.h>

/* Resolves one symbol into *slot, a function pointer of any type: POSIX
 * lets dlsym's object pointer become a function pointer, ISO C does not say
 * how, so the bytes are copied. Returns 0, or -ENOSYS. */
static int resolve(void *lib, const char *sym, void *slot)
{
	void *p = dlsym(lib, sym);
	if (!p)
		return -ENOSYS;
	memcpy(slot, &p, sizeof p);
	return 0;
}

int dlh_nvml_open(struct dlh_nvml *n, const char *library)
{
	memset(n, 0, sizeof *n);
	n->lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
	if (!n->lib)
		return -ENOENT;
	if (resolve(n->lib, "nvmlInit_v2", &n->init) ||
	    resolve(n->lib, "nvmlShutdown", &n->shutdown) ||
	    resolve(n->lib, "nvmlDeviceGetCount_v2", &n->count) ||
	    resolve(n->lib, "nvmlDeviceGetHandleByIndex_v2", &n->handle) ||
	    resolve(n->lib, "nvmlDeviceGetName", &n->name) ||
	    resolve(n->lib, "nvmlDeviceGetMemoryInfo", &n->memory) ||
	    resolve(n->lib, "nvmlDeviceGetPowerManagementLimit", &n->power_limit)) {
		dlh_nvml_close(n);
		return -ENOSYS;
	}
	return 0;
}

void dlh_nvml_close(struct dlh_nvml *n)
{
	if (n->lib)
		dlclose(n->lib);
	memset(n, 0, sizeof *n);
}
