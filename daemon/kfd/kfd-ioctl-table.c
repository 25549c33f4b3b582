/* SPDX-License-Identifier: MIT */
/*
 * The KFD's table of its calls (kfd-ioctl-table.h): the words of
 * include/uapi/linux/kfd_ioctl.h, which amdkfd_ioctls[] of kfd_chardev.c
 * holds (AMDKFD_IOCTL_DEF(AMDKFD_IOC_..., func, flags) puts each word at
 * [_IOC_NR(word)]). Every number from AMDKFD_COMMAND_START (0x01) to 0x27 has
 * one; none is left empty.
 */
#include <stdint.h>

#include "kfd-ioctl-table.h"
#include "kfd-uapi.h"

#define WORD(w) [_IOC_NR(w)] = (w)

/* The size kfd-uapi.h gives DBG_TRAP's word, whichever header defined it. */
_Static_assert(_IOC_SIZE(AMDKFD_IOC_DBG_TRAP) == 32, "struct kfd_ioctl_dbg_trap_args is 32 bytes");

static const uint32_t words[KFD_IOCTL_TABLE_END] = {
        WORD(AMDKFD_IOC_GET_VERSION),
        WORD(AMDKFD_IOC_CREATE_QUEUE),
        WORD(AMDKFD_IOC_DESTROY_QUEUE),
        WORD(AMDKFD_IOC_SET_MEMORY_POLICY),
        WORD(AMDKFD_IOC_GET_CLOCK_COUNTERS),
        WORD(AMDKFD_IOC_GET_PROCESS_APERTURES),
        WORD(AMDKFD_IOC_UPDATE_QUEUE),
        WORD(AMDKFD_IOC_CREATE_EVENT),
        WORD(AMDKFD_IOC_DESTROY_EVENT),
        WORD(AMDKFD_IOC_SET_EVENT),
        WORD(AMDKFD_IOC_RESET_EVENT),
        WORD(AMDKFD_IOC_WAIT_EVENTS),
        WORD(AMDKFD_IOC_DBG_REGISTER_DEPRECATED),
        WORD(AMDKFD_IOC_DBG_UNREGISTER_DEPRECATED),
        WORD(AMDKFD_IOC_DBG_ADDRESS_WATCH_DEPRECATED),
        WORD(AMDKFD_IOC_DBG_WAVE_CONTROL_DEPRECATED),
        WORD(AMDKFD_IOC_SET_SCRATCH_BACKING_VA),
        WORD(AMDKFD_IOC_GET_TILE_CONFIG),
        WORD(AMDKFD_IOC_SET_TRAP_HANDLER),
        WORD(AMDKFD_IOC_GET_PROCESS_APERTURES_NEW),
        WORD(AMDKFD_IOC_ACQUIRE_VM),
        WORD(AMDKFD_IOC_ALLOC_MEMORY_OF_GPU),
        WORD(AMDKFD_IOC_FREE_MEMORY_OF_GPU),
        WORD(AMDKFD_IOC_MAP_MEMORY_TO_GPU),
        WORD(AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU),
        WORD(AMDKFD_IOC_SET_CU_MASK),
        WORD(AMDKFD_IOC_GET_QUEUE_WAVE_STATE),
        WORD(AMDKFD_IOC_GET_DMABUF_INFO),
        WORD(AMDKFD_IOC_IMPORT_DMABUF),
        WORD(AMDKFD_IOC_ALLOC_QUEUE_GWS),
        WORD(AMDKFD_IOC_SMI_EVENTS),
        WORD(AMDKFD_IOC_SVM),
        WORD(AMDKFD_IOC_SET_XNACK_MODE),
        WORD(AMDKFD_IOC_CRIU_OP),
        WORD(AMDKFD_IOC_AVAILABLE_MEMORY),
        WORD(AMDKFD_IOC_EXPORT_DMABUF),
        WORD(AMDKFD_IOC_RUNTIME_ENABLE),
        WORD(AMDKFD_IOC_DBG_TRAP),
        WORD(AMDKFD_IOC_CREATE_PROCESS),
};

unsigned long kfd_ioctl_word(unsigned nr) {
        return nr < KFD_IOCTL_TABLE_END ? words[nr] : 0;
}
