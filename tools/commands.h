/*
 * commands.h - the `ember` tool's sub-commands.
 *
 * Each sub-command lives in tools/cmd_<name>.c and has the signature of
 * main(): it gets argv with argv[0] = the sub-command's name, prints its
 * result to stdout, diagnostics to stderr, and returns the exit status.
 * tools/ember.c holds the table that maps names to these functions.
 */
#ifndef EMBER_COMMANDS_H
#define EMBER_COMMANDS_H

int cmd_version(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_template(int argc, char **argv);

#endif
