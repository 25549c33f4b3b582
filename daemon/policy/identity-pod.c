/* SPDX-License-Identifier: MIT */
/*
 * The Kubernetes pod a process runs in, from its cgroup path. The kubelet
 * puts each pod's containers under a pod cgroup named after the pod's UID:
 * with the systemd cgroup driver kubepods[-besteffort|-burstable]-pod<UID>.slice,
 * the UID's dashes written as '_' (a '-' in a slice name means nesting);
 * with the cgroupfs driver kubepods/[besteffort|burstable/]pod<UID>
 * (kubernetes pkg/kubelet/cm/pod_container_manager_linux.go GetPodContainerName,
 * cgroup_manager_linux.go ToSystemd). The container itself is below it
 * (cri-containerd-<id>.scope, crio-<id>.scope, docker-<id>.scope: identity.c).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "policy/identity.h"

#define POD_UID_LEN 36 /* 8-4-4-4-12 */

/* Copies a UID of POD_UID_LEN characters, with '_' read as '-' where
 * underscores is set, into out if it has the 8-4-4-4-12 hex form. */
static bool pod_uid_copy(const char *s, size_t len, bool underscores, char out[POD_UID_LEN + 1]) {
        if (len != POD_UID_LEN)
                return false;
        for (size_t i = 0; i < len; i++) {
                char c = s[i];
                bool dash_here = i == 8 || i == 13 || i == 18 || i == 23;

                if (underscores && c == '_')
                        c = '-';
                if (dash_here ? c != '-' : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
                        return false;
                out[i] = c;
        }
        out[len] = 0;
        return true;
}

static bool is_hex64(const char *s, size_t len) {
        if (len != 64)
                return false;
        for (size_t i = 0; i < len; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return true;
}

int identity_pod_from_cgroup(const char *cgroup, char **ret, char **ret_container_id) {
        char uid[POD_UID_LEN + 1] = "";
        const char *after = NULL;
        bool under_kubepods = false;

        *ret = NULL;
        if (ret_container_id)
                *ret_container_id = NULL;
        if (!cgroup)
                return 0;
        for (const char *p = cgroup; *p;) {
                size_t len;

                while (*p == '/')
                        p++;
                len = strcspn(p, "/");
                if (len == 0)
                        break;
                if (len >= strlen("kubepods") && strncmp(p, "kubepods", strlen("kubepods")) == 0) {
                        const char *suffix = p + len - strlen(".slice");
                        const char *pod = NULL;

                        under_kubepods = true;
                        /* systemd driver: the last "-pod" of kubepods…-pod<UID>.slice */
                        if (len > strlen(".slice") && strncmp(suffix, ".slice", strlen(".slice")) == 0)
                                for (const char *q = p; q + 4 <= suffix; q++)
                                        if (strncmp(q, "-pod", 4) == 0)
                                                pod = q + 4;
                        if (pod && pod_uid_copy(pod, (size_t) (suffix - pod), true, uid)) {
                                after = p + len;
                                break;
                        }
                } else if (under_kubepods && len > 3 && strncmp(p, "pod", 3) == 0 &&
                           pod_uid_copy(p + 3, len - 3, false, uid)) {
                        after = p + len; /* cgroupfs driver: kubepods/[QOS/]pod<UID> */
                        break;
                }
                uid[0] = 0;
                p += len;
        }
        if (!under_kubepods || uid[0] == 0)
                return 0;
        *ret = strdup(uid);
        if (!*ret)
                return -ENOMEM;
        /* cgroupfs driver: the container's cgroup below the pod's is its bare
         * 64-hex id (kubepods/besteffort/pod<UID>/<id>). */
        if (ret_container_id && after) {
                size_t len;

                while (*after == '/')
                        after++;
                len = strcspn(after, "/");
                if (is_hex64(after, len) && !(*ret_container_id = strndup(after, len)))
                        return -ENOMEM;
        }
        return 0;
}
