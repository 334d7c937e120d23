# convctx: PGXS build. The control file is the single source of the version.
# convctx_recall: the companion that adds semantic recall (needs pgvector).
EXTENSION    = convctx convctx_recall
EXTVERSION   = $(shell sed -n "s/^default_version *= *'\(.*\)'/\1/p" convctx.control)

MODULE_big   = convctx
OBJS         = $(patsubst %.c,%.o,$(sort $(wildcard src/*.c src/*/*.c)))
DATA         = $(sort $(wildcard sql/convctx--*.sql sql/convctx_recall--*.sql))
PG_CPPFLAGS  = -I$(srcdir)/src -DCONVCTX_VERSION=\"$(EXTVERSION)\"

# pg_regress inputs are the sql/*.sql files that are not install scripts.
REGRESS      = $(sort $(basename $(notdir $(filter-out sql/convctx--% sql/convctx_recall--%,$(wildcard sql/*.sql)))))
REGRESS_OPTS = --load-extension=convctx

ISOLATION      = $(sort $(basename $(notdir $(wildcard test/specs/*.spec))))
ISOLATION_OPTS = --inputdir=test --load-extension=convctx

ifneq ($(wildcard test/t/*.pl),)
TAP_TESTS    = 1
PROVE_TESTS  = test/t/*.pl
endif

EXTRA_CLEAN  = output_iso tmp_check log results regression.diffs regression.out

PG_CONFIG   ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs 2>/dev/null)
ifeq ($(wildcard $(PGXS)),)
$(error $(PG_CONFIG) finds no PostgreSQL build files (PGXS): install the Debian package postgresql-server-dev-15, or set PG_CONFIG to the pg_config of the server to build for)
endif
include $(PGXS)

# Each header the build needs from outside, and the Debian package that
# has it: a missing one is named with its package before anything compiles.
HEADER_PACKAGES = postgres.h:postgresql-server-dev-$(MAJORVERSION) \
                  libpq-fe.h:libpq-dev jansson.h:libjansson-dev
.PHONY: check-headers
check-headers:
	@for hp in $(HEADER_PACKAGES); do \
		printf '#include <%s>\n' "$${hp%%:*}" | \
			$(CC) $(CPPFLAGS) -I$(includedir) -E -x c - >/dev/null 2>&1 || \
			{ echo "convctx: header $${hp%%:*} not found: install the Debian package $${hp#*:}" >&2; exit 1; }; \
	done

# The compiler and flags of the C files of src/, one line
# (scripts/check-includes.sh compiles each header alone with them).
.PHONY: print-cflags
print-cflags:
	@echo $(CC) $(CFLAGS) $(CPPFLAGS)

# The command-line tool (client/): a client program linked with libpq and
# jansson, installed next to pg_dump.
CLIENT_OBJS = $(patsubst %.c,%.o,$(sort $(wildcard client/*.c)))
EXTRA_CLEAN += client/convctx $(CLIENT_OBJS)

client/%.o: client/%.c $(wildcard client/*.h)
	$(CC) $(CFLAGS) $(PG_CFLAGS) -I$(includedir) -DCONVCTX_VERSION=\"$(EXTVERSION)\" -c -o $@ $<

client/convctx: $(CLIENT_OBJS)
	$(CC) $(CFLAGS) $(PG_CFLAGS) -o $@ $(CLIENT_OBJS) $(LDFLAGS_EX) -L$(libdir) -lpq -ljansson

all: client/convctx

install: install-client
.PHONY: install-client
install-client: client/convctx
	$(MKDIR_P) '$(DESTDIR)$(bindir)'
	$(INSTALL_PROGRAM) client/convctx '$(DESTDIR)$(bindir)/convctx'

$(OBJS) $(CLIENT_OBJS): | check-headers

# A form of a released install script that main held before it changed
# (test/upgrade/): installed by the test command only, under a version
# name of its own, with the update script of the version it claims to be,
# so that the tests update a database made by it.
.PHONY: install-upgrade-fixtures
install-upgrade-fixtures:
	$(INSTALL_DATA) test/upgrade/convctx--0.5.0-first.sql '$(DESTDIR)$(datadir)/extension/'
	$(INSTALL_DATA) sql/convctx--0.5.0--0.6.0.sql '$(DESTDIR)$(datadir)/extension/convctx--0.5.0-first--0.6.0.sql'
