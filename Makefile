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
