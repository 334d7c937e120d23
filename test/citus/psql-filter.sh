#!/usr/bin/env bash
# The launcher of psql for the regression tests on Citus (scripts/citus.sh,
# pg_regress --launcher): runs the psql command it is given and takes out of
# its output what Citus adds that says nothing about convctx, so that a test
# whose behaviour is the same on Citus matches its expected output in
# expected/ unchanged:
#	- the WARNING and DETAIL that a temporary object of the test (a helper
#	  function or view in pg_temp) "will be created only locally", also
#	  when psql names the included file they came from (test/helpers.sql);
#	- the shard suffix of a table named in an error or a plan ("turn_102008"
#	  for "turn"), and the port of the node in a plan;
#	- the CONTEXT line that names the node where an error was raised, and
#	  the DETAIL that names the node a NOTICE came from.
set -o pipefail
"$@" 2>&1 | sed -E \
    -e '/^(psql:[^ ]+:[0-9]+: )?WARNING:  "[^"]*" has dependency on unsupported object "schema pg_temp_[0-9]+"$/d' \
    -e '/^(psql:[^ ]+:[0-9]+: )?DETAIL:  "[^"]*" will be created only locally$/d' \
    -e '/^CONTEXT:  while executing command on [0-9.]+:[0-9]+$/d' \
    -e '/^DETAIL:  from [0-9.]+:[0-9]+$/d' \
    -e 's/((relation|table) "[a-z_]+)_[0-9]{6,}"/\1"/g' \
    -e 's/( on [a-z_]+)_[0-9]{6,} /\1 /g' \
    -e 's/Node: host=([0-9.]+) port=[0-9]+ /Node: host=\1 port=<port> /'
