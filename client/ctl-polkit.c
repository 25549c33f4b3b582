/* SPDX-License-Identifier: MIT */
/* See ctl-polkit.h. The agent is a child process: it must not outlive us. */
#include "ctl-polkit.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* polkitd ships it (Debian's polkitd package, /usr/bin/pkttyagent). */
#define PKTTYAGENT "pkttyagent"
#define AGENT_REGISTER_TIMEOUT_MS 5000

static pid_t agent_pid;

void ctl_polkit_agent_open(void) {
        char fd_arg[16];
        struct pollfd p;
        int pipefd[2];
        pid_t pid;

        if (agent_pid > 0 || geteuid() == 0 || !isatty(STDIN_FILENO))
                return;
        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return;
        pid = fork();
        if (pid < 0) {
                close(pipefd[0]);
                close(pipefd[1]);
                return;
        }
        if (pid == 0) {
                /* The write end, kept open across exec: pkttyagent closes it once registered. */
                int fd = fcntl(pipefd[1], F_DUPFD, 3);

                /* Never an agent left behind for a kfdbrokerctl that was killed. */
                if (fd < 0 || prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() == 1)
                        _exit(EXIT_FAILURE);
                snprintf(fd_arg, sizeof(fd_arg), "%d", fd);
                /* --fallback: do not replace an agent the desktop already runs. */
                execlp(PKTTYAGENT, PKTTYAGENT, "--notify-fd", fd_arg, "--fallback", (char *) NULL);
                _exit(127);
        }
        close(pipefd[1]);
        agent_pid = pid;
        /* EOF (or the agent's exit) means it is registered, or will never be. */
        p = (struct pollfd) { .fd = pipefd[0], .events = POLLIN };
        while (poll(&p, 1, AGENT_REGISTER_TIMEOUT_MS) < 0 && errno == EINTR)
                ;
        close(pipefd[0]);
}

void ctl_polkit_agent_close(void) {
        if (agent_pid <= 0)
                return;
        (void) kill(agent_pid, SIGTERM);
        while (waitpid(agent_pid, NULL, 0) < 0 && errno == EINTR)
                ;
        agent_pid = 0;
}
