/*
 * device.c - which device runs the forward pass (compute.h, devices):
 * the CPU (default) or a Vulkan device, chosen once at start-up from
 * --device / the config key `device` / EMBER_DEVICE. The choice is
 * process-wide; compute_cpu.c's objects consult it when they are made and
 * remember which device made them.
 *
 * A binary built with Vulkan that finds no driver or no usable device says
 * so once on stderr and stays on the CPU; a binary built without Vulkan
 * refuses "vulkan" (it cannot honour it).
 */
#include "compute.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "vk.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int chosen;    /* a selection was made */
static int on_vulkan; /* the active device is Vulkan */

/* "cpu" -> -2, "vulkan" -> -1, "vulkan:N" -> N; else EMBER_EINVAL. */
static int parse(const char *s, char *err)
{
	char *end;
	long n;

	if (strcmp(s, "cpu") == 0)
		return -2;
	if (strcmp(s, "vulkan") == 0)
		return -1;
	if (strncmp(s, "vulkan:", 7) == 0 && s[7] >= '0' && s[7] <= '9') {
		n = strtol(s + 7, &end, 10);
		if (*end == '\0' && n < 64)
			return (int)n;
	}
	return ember_seterr(err, EMBER_EINVAL, "device '%s': want cpu, vulkan or vulkan:N", s);
}

int compute_device_select(const char *spec, char *err)
{
	char why[EMBER_ERR_MAX];
	int idx, rc = 0;

	if (!spec || !*spec)
		spec = getenv("EMBER_DEVICE");
	if (!spec || !*spec)
		spec = "cpu";
	if ((idx = parse(spec, err)) < -2)
		return idx;
	pthread_mutex_lock(&lock);
	chosen = 1;
	on_vulkan = 0;
	if (idx >= -1) {
		if (!vk_built()) {
			rc = ember_seterr(err, EMBER_EUNSUPPORTED, "device '%s': this binary was "
					  "built without Vulkan (make VULKAN=1)", spec);
		} else if (vk_open(idx, why) < 0) {
			fprintf(stderr, "ember: %s; using the CPU\n", why);
		} else {
			on_vulkan = 1;
		}
	}
	pthread_mutex_unlock(&lock);
	return rc;
}

int compute_device_vulkan(void)
{
	int v;

	pthread_mutex_lock(&lock);
	if (!chosen) {
		char err[EMBER_ERR_MAX];

		pthread_mutex_unlock(&lock);
		if (compute_device_select(NULL, err) < 0)
			fprintf(stderr, "ember: EMBER_DEVICE: %s; using the CPU\n", err);
		pthread_mutex_lock(&lock);
		chosen = 1;
	}
	v = on_vulkan;
	pthread_mutex_unlock(&lock);
	return v;
}

const char *compute_device_name(char *buf, size_t cap)
{
	if (compute_device_vulkan())
		snprintf(buf, cap, "vulkan (%s)", vk_device_name());
	else
		snprintf(buf, cap, "cpu");
	return buf;
}

char *compute_devices_describe(char *buf, size_t cap)
{
	return vk_describe(buf, cap);
}
