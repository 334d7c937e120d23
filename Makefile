# convctx: PGXS build. The control file is the single source of the version.
EXTENSION    = convctx
EXTVERSION   = $(shell sed -n "s/^default_version *= *'\(.*\)'/\1/p" $(EXTENSION).control)

MODULE_big   = convctx
OBJS         = $(patsubst %.c,%.o,$(sort $(wildcard src/*.c)))
DATA         = $(sort $(wildcard sql/convctx--*.sql))
PG_CPPFLAGS  = -I$(srcdir)/src -DCONVCTX_VERSION=\"$(EXTVERSION)\"

# pg_regress inputs are the sql/*.sql files that are not install scripts.
REGRESS      = $(sort $(basename $(notdir $(filter-out sql/convctx--%,$(wildcard sql/*.sql)))))
REGRESS_OPTS = --load-extension=convctx

ISOLATION      = $(sort $(basename $(notdir $(wildcard test/specs/*.spec))))
ISOLATION_OPTS = --inputdir=test --load-extension=convctx

ifneq ($(wildcard test/t/*.pl),)
TAP_TESTS    = 1
PROVE_TESTS  = test/t/*.pl
endif

EXTRA_CLEAN  = output_iso tmp_check log results regression.diffs regression.out

PG_CONFIG   ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# The command-line tool (client/): a client program linked with libpq and
# jansson, installed next to pg_dump.
CLIENT_OBJS = $(patsubst %.c,%.o,$(sort $(wildcard client/*.c)))
EXTRA_CLEAN += client/convctx $(CLIENT_OBJS)

client/%.o: client/%.c client/convctx.h
	$(CC) $(CFLAGS) $(PG_CFLAGS) -I$(includedir) -DCONVCTX_VERSION=\"$(EXTVERSION)\" -c -o $@ $<

client/convctx: $(CLIENT_OBJS)
	$(CC) $(CFLAGS) $(PG_CFLAGS) -o $@ $(CLIENT_OBJS) $(LDFLAGS_EX) -L$(libdir) -lpq -ljansson

all: client/convctx

install: install-client
.PHONY: install-client
install-client: client/convctx
	$(MKDIR_P) '$(DESTDIR)$(bindir)'
	$(INSTALL_PROGRAM) client/convctx '$(DESTDIR)$(bindir)/convctx'
