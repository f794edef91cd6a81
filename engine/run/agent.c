/* agent.c - dlh-agent: one launch over nodes reached by different agents
 *
 *   dlh-agent MAP HOST COMMAND...
 *
 * mpirun starts its daemon on each node of a run through one launch agent
 * (plm_rsh_agent). Where the pool file gives a run's nodes different agents
 * (another ssh port, another config, a user), the engine names this
 * program as that agent with MAP, a file in the job's directory of lines
 * "HOST AGENT WORDS..." (no word of a spec in it). It looks HOST up there
 * and replaces itself with that node's agent given HOST and COMMAND as they
 * came: the node sees what the agent alone would have given it. No shell
 * is involved on this side. A HOST not in MAP exits 255, as ssh does when
 * it cannot reach a host. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define AGENT_WORDS_MAX 64
#define MAP_LINE_MAX 1024

int main(int argc, char **argv)
{
	if (argc < 4 || !strcmp(argv[1], "--help")) {
		fprintf(argc < 4 ? stderr : stdout,
			"usage: dlh-agent MAP HOST COMMAND...\n"
			"Runs HOST's agent from MAP (lines \"HOST AGENT WORDS...\") with HOST and\n"
			"COMMAND: mpirun's one launch agent for nodes reached in different ways.\n");
		return argc < 4 ? 2 : 0;
	}
	const char *host = argv[2];
	FILE *f = fopen(argv[1], "re");
	if (!f) {
		fprintf(stderr, "dlh-agent: cannot read \"%s\": %s\n", argv[1], strerror(errno));
		return 255;
	}
	static char line[MAP_LINE_MAX];
	char *words[AGENT_WORDS_MAX + 1];
	int n = 0, found = 0;
	while (!found && fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = '\0';
		char *save = NULL, *w = strtok_r(line, " \t", &save);
		if (!w || strcmp(w, host))
			continue;
		found = 1;
		while ((w = strtok_r(NULL, " \t", &save)) && n < AGENT_WORDS_MAX)
			words[n++] = w;
	}
	fclose(f);
	if (!found || n == 0) {
		fprintf(stderr, "dlh-agent: no agent for host \"%s\" in \"%s\"\n", host, argv[1]);
		return 255;
	}
	char **args = calloc((size_t)(n + argc), sizeof *args);
	if (!args) {
		fprintf(stderr, "dlh-agent: out of memory\n");
		return 255;
	}
	int k = 0;
	for (int i = 0; i < n; i++)
		args[k++] = words[i];
	for (int i = 2; i < argc; i++)   /* HOST, then the command as it came */
		args[k++] = argv[i];
	args[k] = NULL;
	execvp(args[0], args);
	fprintf(stderr, "dlh-agent: cannot run \"%s\": %s\n", args[0], strerror(errno));
	return 255;
}
