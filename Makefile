# The two README commands: `make serve` and `make test`. Everything else is the pipeline.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip install -q -c constraints.txt
# The bundled models: the default (served first) and the RNNsearch, each rebuilt from its run by
# `make rebuild-models`.
DEFAULT_MODEL ?= models/transformer-es-en
RNNSEARCH_MODEL ?= models/rnnsearch-es-en
# What the measuring targets (evaluate, bench, soak, links) measure: the default, unless told
# (`make bench MODEL=$(RNNSEARCH_MODEL)`).
MODEL ?= $(DEFAULT_MODEL)
# `make serve` serves these, the first the default (a request names another by its manifest's name).
EN_ES_MODEL ?= models/transformer-en-es
SERVE_MODELS ?= $(DEFAULT_MODEL) $(RNNSEARCH_MODEL) $(EN_ES_MODEL)
DATA ?= data/bible
# What the benchmarks decode: DATA's test split once `make data` has built it; in a fresh clone, which
# has no data/, the committed everyday test set (144 sentences).
BENCH_DATA ?= $(if $(wildcard $(DATA)/test.*),$(DATA),tests/data/everyday)
# A shorter `make bench`: test sentences (evenly spaced) and repeats of each benchmark (default: theirs).
BENCH_SENTENCES ?=
BENCH_REPEATS ?=
SOFTWARE ?= data/gettext
MIXED ?= data/es-en
# the dev sets the Transformers' quality weights are fitted on: every domain they serve (`make data`)
QUALITY_DATA ?= $(DATA) $(SOFTWARE) data/prose data/tatoeba data/news tests/data/everyday
RUN ?= runs/rnnsearch-es-en
# the Transformer (model/architectures/transformer.py, model/configs/transformer-es-en.yaml) and where
# `make export-transformer` writes its directories; the bundled one, models/transformer-es-en, is that
# export (TRANSFORMER_EXPORT), its checkpoint.pt left out (docs/transformer.md)
TRANSFORMER_RUN ?= runs/transformer-es-en
TRANSFORMER_MODEL ?= $(TRANSFORMER_RUN)/model
# the bundled Transformer's weights: the general-Spanish GPU stage, its last three validations averaged
TRANSFORMER_EXPORT_RUN ?= $(TRANSFORMER_RUN)-general-gpu
TRANSFORMER_AVERAGE ?= 3
TRANSFORMER_CHECKPOINT ?= averaged-last$(TRANSFORMER_AVERAGE).pt
TRANSFORMER_EXPORT ?= $(TRANSFORMER_EXPORT_RUN)/model
# the run and checkpoint `make export` turns into the bundled RNNsearch: stage 7's best.pt
EXPORT_RUN ?= $(RUN)-copies
CHECKPOINT ?= best.pt

.PHONY: serve test install data train export export-transformer export-needs-a-run rebuild-models \
	rebuild-needs-runs evaluate bench soak stubs lint-proto clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# Runtime only: what `make serve` needs (no torch).
$(VENV)/.runtime: pyproject.toml constraints.txt | $(BIN)/python
	$(PIP) -e .
	touch $@

# Runtime, training and development dependencies.
$(VENV)/.dev: pyproject.toml constraints.txt | $(BIN)/python
	$(PIP) -e '.[train,dev]'
	touch $@ $(VENV)/.runtime

install: $(VENV)/.dev

serve: $(VENV)/.runtime
	$(BIN)/attnmt serve $(foreach m,$(SERVE_MODELS),--model $(m))

# The suite runs in TEST_WORKERS processes (pytest-xdist), each test file in one of them, so that a file's
# servers and fixtures stay together; then the tests marked `serial` (pyproject.toml) alone.
# `make test TEST_WORKERS=0` runs all of it in one process.
TEST_WORKERS ?= 2

# Debian `prometheus`: promtool checks the live /metrics scrape and the alert rules, and
# the prometheus server scrapes a live attnmt serve in tests/integration/test_prometheus_live.py.
test: $(VENV)/.dev
	@command -v promtool >/dev/null || (apt-get update -qq && apt-get install -y -qq prometheus >/dev/null) \
		|| echo "promtool could not be installed: the promtool checks will be skipped"
# The linter ([tool.ruff] in pyproject.toml) runs before the tests.
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile -m 'not serial'
	$(BIN)/python -m pytest -q -m serial

# General Spanish from files no package registry carries, each taken from a path or its upstream
# address and checked against the sha256 of the version its card documents (model/data/upstream.py).
# ../shared/data, where present, is a local copy of both: TATOEBA=../shared/data/tatoeba-spa-eng-2018-05-13/spa.txt
# TESTSETS=../shared/data/public-testsets/spa-eng (the upstream zip is a newer Tatoeba release).
TATOEBA ?= https://www.manythings.org/anki/spa-eng.zip
TESTSETS ?= https://raw.githubusercontent.com/Helsinki-NLP/OPUS-MT-testsets/ac0f19c0be3cb4e0d9450fcb2d7a9847c4bdd180/testsets/spa-eng
# the held-out sets whose sentences leave every general-Spanish corpus and its mix (model/data/decontaminate.py)
EXCLUDE ?= tests/data/public tests/data/everyday tests/data/gold-alignments $(DATA) $(SOFTWARE) data/prose

data: $(VENV)/.dev
	@dpkg -s sword-text-sparv sword-text-web libsword-utils >/dev/null 2>&1 \
		|| (apt-get update -q && apt-get install -y -q sword-text-sparv sword-text-web libsword-utils)
	$(BIN)/attnmt data bible $(DATA)
	@test -n "$$(ls /var/lib/apt/lists/*_Packages 2>/dev/null)" || apt-get update -q
	$(BIN)/attnmt data gettext $(SOFTWARE)
	$(BIN)/attnmt data mix $(MIXED) $(DATA):2 $(SOFTWARE):1 --dev-max 500
	$(BIN)/attnmt data mix $(MIXED)-bible4 $(DATA):4 $(SOFTWARE):1 --dev-max 500
	$(BIN)/attnmt data mix $(MIXED)-bible12 $(DATA):12 $(SOFTWARE):1 --dev-max 500
	$(BIN)/attnmt data copies $(SOFTWARE)-copies --from $(SOFTWARE)
	$(BIN)/attnmt data mix $(MIXED)-copies $(DATA):4 $(SOFTWARE):1 $(SOFTWARE)-copies:1 --dev-max 500
	@dpkg -s apertium apertium-eng-spa >/dev/null 2>&1 || apt-get install -y -q apertium apertium-eng-spa
	$(BIN)/attnmt data prose data/prose
	$(BIN)/attnmt data backtranslate data/backtranslation
	$(BIN)/attnmt data cldr data/cldr
	$(BIN)/attnmt data mix $(MIXED)-everyday $(DATA):4 $(SOFTWARE):1 $(SOFTWARE)-copies:1 data/prose:1 \
		data/backtranslation:3 data/cldr:2 --dev-max 500
	# the Transformer's everyday stage: everyday pairs weighed more, Apertium's dictionary in, and the
	# everyday set's dev split (never its test split) in validation
	$(BIN)/attnmt data dictionary data/dictionary
	# game dialogue and narration (Wesnoth, FreedroidRPG, Widelands, gbrainy)
	$(BIN)/attnmt data dialogue data/dialogue
	# school instructions, word problems and vocabulary (GCompris, Tux Paint's stamps)
	$(BIN)/attnmt data school data/school
	$(BIN)/attnmt data mix $(MIXED)-everyday2 $(DATA):3 $(SOFTWARE):1 $(SOFTWARE)-copies:1 data/prose:1 \
		data/backtranslation:4 data/cldr:3 data/dictionary:1 tests/data/everyday:0 --dev-max 500
	# its second stage: the back-translation half untagged, so real input reaches what it taught; dialogue in
	$(BIN)/attnmt data mix $(MIXED)-everyday3 $(DATA):3 $(SOFTWARE):1 $(SOFTWARE)-copies:1 data/prose:1 \
		data/backtranslation:2 data/backtranslation:2:untagged data/cldr:3 data/dictionary:1 data/dialogue:2 \
		tests/data/everyday:0 --dev-max 500
	# its third: Apertium's dictionary phrases x4 and the school corpus in
	$(BIN)/attnmt data mix $(MIXED)-everyday4 $(DATA):3 $(SOFTWARE):1 $(SOFTWARE)-copies:1 data/prose:1 \
		data/backtranslation:2 data/backtranslation:2:untagged data/cldr:3 data/dictionary:4 data/dialogue:2 \
		data/school:3 tests/data/everyday:0 --dev-max 500
	# general Spanish (docs/corpora.md): WMT's older news, Tatoeba, names of places and things, back-translated
	# State of the Union addresses; newstest2012 and a Tatoeba slice join the dev sets
	@command -v npm >/dev/null || apt-get install -y -q npm
	@command -v gresource >/dev/null || apt-get install -y -q libglib2.0-bin
	$(BIN)/attnmt data news data/news --from $(TESTSETS) --exclude $(EXCLUDE)
	$(BIN)/attnmt data tatoeba data/tatoeba --from $(TATOEBA) --exclude $(EXCLUDE) data/news
	$(BIN)/attnmt data names data/names --exclude $(EXCLUDE) data/news
	$(BIN)/attnmt data sotu data/sotu --exclude $(EXCLUDE) data/news
	# the everyday4 mix with them; weights a first guess, to be tuned on the dev sets
	$(BIN)/attnmt data mix $(MIXED)-general $(DATA):3 $(SOFTWARE):1 $(SOFTWARE)-copies:1 data/prose:1 \
		data/backtranslation:2 data/backtranslation:2:untagged data/cldr:3 data/dictionary:4 data/dialogue:2 \
		data/school:3 data/tatoeba:2 data/news:3 data/names:1 data/sotu:1 tests/data/everyday:0 \
		--exclude $(EXCLUDE) --dev-max 500
	# English→Spanish (docs/corpora.md): the same mix, read the other way by its config, without the back-translated
	# pairs (data/backtranslation, data/sotu), whose Spanish is Apertium's output and would become the target
	$(BIN)/attnmt data mix data/en-es-general $(DATA):3 $(SOFTWARE):1 $(SOFTWARE)-copies:1 data/prose:1 \
		data/cldr:3 data/dictionary:4 data/dialogue:2 data/school:3 data/tatoeba:2 data/news:3 data/names:1 \
		tests/data/everyday:0 --exclude $(EXCLUDE) --dev-max 500

# Seven stages, each resumable (run the same command again): the Bible alone (about two
# hours); both domains from it with a joint vocabulary (about two hours more;
# model/transfer.py carries the weights over); then the Bible weighed ×4 and ×12 against the
# software messages (half an hour each) to win back the verses without losing the messages;
# then the model widened from 256 to 384 recurrent units (model/transfer.py widen_state) and
# trained on the ×4 mix (40 minutes, and 45 more with a fresh learning rate), the capacity
# both domains need at once; then 35 minutes with copy variants of the messages added
# (model/data/copies.py), so that terms the test catalogs use are copied, not translated (stage 7,
# bundled). Stage 8 (stopped at update 1,950 of its 150 minutes, not bundled) continues stage 7 on
# the everyday mix: help prose, tagged back-translation of everyday English, CLDR phrases. Stage 9
# (trained on a GPU, not bundled) continues it with guided alignment on eflomal's links. The
# Transformer (6,000 updates), then its four everyday stages; the fourth, trained on a GPU, is the
# bundled models/transformer-es-en (docs/training.md).
train: $(VENV)/.dev
	$(BIN)/attnmt train --config model/configs/rnnsearch-es-en-bible.yaml --run $(RUN)-bible
	$(BIN)/attnmt train --config model/configs/rnnsearch-es-en.yaml --run $(RUN)
	$(BIN)/attnmt train --config model/configs/rnnsearch-es-en-bible4.yaml --run $(RUN)-bible4
	$(BIN)/attnmt train --config model/configs/rnnsearch-es-en-bible12.yaml --run $(RUN)-bible12
	$(BIN)/attnmt train --config model/configs/rnnsearch-es-en-wide.yaml --run $(RUN)-wide
	$(BIN)/attnmt train --config model/configs/rnnsearch-es-en-wide2.yaml --run $(RUN)-wide2
	$(BIN)/attnmt train --config model/configs/rnnsearch-es-en-copies.yaml --run $(RUN)-copies
	$(BIN)/attnmt train --config model/configs/rnnsearch-es-en-everyday.yaml --run $(RUN)-everyday
	$(BIN)/attnmt train --config model/configs/rnnsearch-es-en-guided.yaml --run $(RUN)-guided
	$(BIN)/attnmt train --config model/configs/transformer-es-en.yaml --run $(TRANSFORMER_RUN)
	$(BIN)/attnmt average --run $(TRANSFORMER_RUN) --last 5
	# continued on a mix that weighs everyday Spanish more, from the averaged weights as exported
	test -f $(TRANSFORMER_MODEL)/checkpoint.pt || $(BIN)/attnmt export --run $(TRANSFORMER_RUN) \
		--checkpoint averaged.pt --out $(TRANSFORMER_MODEL)
	$(BIN)/attnmt train --config model/configs/transformer-es-en-everyday.yaml --run $(TRANSFORMER_RUN)-everyday
	# its second everyday stage starts from the everyday stage's last three checkpoints, averaged and exported
	test -f $(TRANSFORMER_RUN)-everyday/model/checkpoint.pt || $(MAKE) export-transformer \
		TRANSFORMER_EXPORT_RUN=$(TRANSFORMER_RUN)-everyday
	$(BIN)/attnmt train --config model/configs/transformer-es-en-everyday3.yaml --run $(TRANSFORMER_RUN)-everyday3
	# its third from the second's last three checkpoints, averaged and exported
	test -f $(TRANSFORMER_RUN)-everyday3/model/checkpoint.pt || $(MAKE) export-transformer \
		TRANSFORMER_EXPORT_RUN=$(TRANSFORMER_RUN)-everyday3
	$(BIN)/attnmt train --config model/configs/transformer-es-en-everyday4.yaml --run $(TRANSFORMER_RUN)-everyday4
	# its fourth, on a GPU (docs/gpu.md "Training on a GPU"; TRAIN_DEVICE=cpu runs it here, about 40 hours)
	test -f $(TRANSFORMER_RUN)-everyday4/model/checkpoint.pt || $(MAKE) export-transformer \
		TRANSFORMER_EXPORT_RUN=$(TRANSFORMER_RUN)-everyday4
	$(BIN)/attnmt train --config model/configs/transformer-es-en-everyday5.yaml --run $(TRANSFORMER_RUN)-everyday5 \
		$(if $(TRAIN_DEVICE),--device $(TRAIN_DEVICE))
	# general Spanish (data/es-en-general: Tatoeba, news, names, State of the Union back-translated) from the
	# bundled weights, read back from its graphs; on 2 CPU cores about 700 updates an hour, resumable
	$(BIN)/attnmt train --config model/configs/transformer-es-en-general.yaml --run $(TRANSFORMER_RUN)-general
	# its GPU stage from that run's best (docs/gpu.md "Both directions in one call"; 12 minutes on an H200)
	$(BIN)/attnmt train --config model/configs/transformer-es-en-general-gpu.yaml --run $(TRANSFORMER_RUN)-general-gpu \
		--init-from $(TRANSFORMER_RUN)-general $(if $(TRAIN_DEVICE),--device $(TRAIN_DEVICE))
	$(MAKE) train-en-es

# The pieces a lent GPU's training call carries (docs/gpu.md, "Both directions in one call"): both typed-input
# stages' data, links, piece-link caches and starting weights (the bundled models'), in .gpu-p1, .gpu-p2, sized
# with the bundled weights set aside, which are put back afterwards whatever happens; about 5 minutes.
.PHONY: gpu-train-payload
gpu-train-payload: $(VENV)/.dev
	@test -f data/es-en-general/train.links -a -f data/en-es-general/train.links \
		|| $(BIN)/python -c "import eflomal" 2>/dev/null || $(PIP) -e '.[align]'
	test -f data/es-en-general/train.links || $(BIN)/attnmt data links data/es-en-general
	test -f data/en-es-general/train.links || $(BIN)/attnmt data links data/en-es-general --src en --tgt es
	$(BIN)/python -m attnmt.bench.gpu_aside aside
	$(BIN)/python -m attnmt.bench.gpu_train_payload; rc=$$?; $(BIN)/python -m attnmt.bench.gpu_aside back; exit $$rc

# The pieces the GPU checks' calls carry (docs/gpu.md, "The serving checks": onnxruntime-gpu pruned to sm_90, the
# serving requirements for CPython 3.12, the Bible test split), sized with the bundled weights set aside.
.PHONY: gpu-check-payload
gpu-check-payload: $(VENV)/.dev
	$(BIN)/python -m attnmt.bench.gpu_aside aside
	$(BIN)/python -m attnmt.bench.gpu_payload; rc=$$?; $(BIN)/python -m attnmt.bench.gpu_aside back; exit $$rc

# English→Spanish (model/configs/transformer-en-es.yaml, docs/training.md): the bundled Spanish→English weights
# trained the other way on data/en-es-general (`make data`), guided by that mix's eflomal links written
# English→Spanish (once, a few minutes); at most 2.5 hours on 2 CPU cores, resumable (run it again).
EN_ES_RUN ?= runs/transformer-en-es
# the checkpoint exported (made by averaging the last three validations when the run lacks it), as
# TRANSFORMER_CHECKPOINT for Spanish→English: an average made elsewhere (two runs' weights) under its own name
EN_ES_CHECKPOINT ?= averaged-last3.pt
.PHONY: train-en-es export-en-es
train-en-es: $(VENV)/.dev
	@test -f data/en-es-general/train.links || $(BIN)/python -c "import eflomal" 2>/dev/null || $(PIP) -e '.[align]'
	test -f data/en-es-general/train.links || $(BIN)/attnmt data links data/en-es-general --src en --tgt es
	$(BIN)/attnmt train --config model/configs/transformer-en-es.yaml --run $(EN_ES_RUN)

# A software-weighted continuation (model/configs/transformer-en-es-software.yaml): the same mix with the
# software messages weighed x3, from the bundled transformer-en-es, on the CPU; resumable. Export it with
# `make export-en-es EN_ES_RUN=runs/transformer-en-es-software`.
.PHONY: data-en-es-software train-en-es-software
data-en-es-software: $(VENV)/.dev
	$(BIN)/attnmt data mix data/en-es-software $(DATA):3 $(SOFTWARE):3 $(SOFTWARE)-copies:1 data/prose:1 \
		data/cldr:3 data/dictionary:4 data/dialogue:2 data/school:3 data/tatoeba:2 data/news:3 data/names:1 \
		tests/data/everyday:0 --exclude $(EXCLUDE) --dev-max 500
	@$(BIN)/python -c "import eflomal" 2>/dev/null || $(PIP) -e '.[align]'
	$(BIN)/attnmt data links data/en-es-software --src en --tgt es
train-en-es-software: $(VENV)/.dev
	test -f data/en-es-software/train.links || $(MAKE) data-en-es-software
	$(BIN)/attnmt train --config model/configs/transformer-en-es-software.yaml --run runs/transformer-en-es-software

# Its last three validations averaged and exported as transformer-en-es (source_language en, target_language
# es), with quality-estimation weights. α is read as the Spanish→English model's is (the last layer's head 1,
# Shift-Att, chosen there on the gold set): the gold set is Spanish→English, so this direction has no
# measured choice yet.
export-en-es: $(VENV)/.dev
	@test -f $(EN_ES_RUN)/$(EN_ES_CHECKPOINT) || $(BIN)/attnmt average --run $(EN_ES_RUN) --last 3 \
		--out $(EN_ES_CHECKPOINT)
	$(BIN)/attnmt export --run $(EN_ES_RUN) --checkpoint $(EN_ES_CHECKPOINT) --out $(EN_ES_RUN)/model \
		--name transformer-en-es --alignment-layer -1 --alignment-head 1 --alignment-shift-att
	# names it never learnt kept as written: the known-words list of its training source, with the dev change
	$(BIN)/attnmt fit-names --model $(EN_ES_RUN)/model --corpus data/en-es-general/train.en --data $(QUALITY_DATA)
	# nouns and adjectives it never learnt or saw rarely translated by Apertium's dictionary, with the dev change
	$(BIN)/attnmt fit-lexicon --model $(EN_ES_RUN)/model --corpus data/en-es-general/train.en --data $(QUALITY_DATA)
	# the length penalty requests that name none get (its output runs shorter than the references)
	$(BIN)/attnmt fit-length-penalty --model $(EN_ES_RUN)/model --data $(QUALITY_DATA) --limit 1000
	# which lines have their first word read in small letters where it knows the word only so
	$(BIN)/attnmt fit-first-word --model $(EN_ES_RUN)/model --data $(QUALITY_DATA)
	# past how many words a sentence is translated in parts, cut after a comma, semicolon or colon
	$(BIN)/attnmt fit-split --model $(EN_ES_RUN)/model --data $(QUALITY_DATA)
	# the quality weights, last: fitted on the dev translations as served
	$(BIN)/attnmt fit-quality --model $(EN_ES_RUN)/model --data $(QUALITY_DATA)
	# as bundled (models/transformer-en-es): its weights stored as int8
	$(BIN)/attnmt store-weights $(EN_ES_RUN)/model --out $(EN_ES_RUN)/model-stored

# RNNsearch once per score function at an equal budget (one config, resumable: run it
# again), each exported beside its run (not committed) for the AER and speed comparisons.
SCORE_FUNCTIONS ?= bahdanau general dot scaled_dot
# the config's own seed (2026) runs in runs/score-NAME, each further seed in runs/score-seedN-NAME; a run
# already exported is kept (the runs of 2026-11-26 other than bahdanau's first were trained on a lent GPU)
SCORE_SEEDS ?= 2026 2027
.PHONY: score-functions
score-functions: $(VENV)/.dev
	# each run trained and exported unless it is already, then one table of every run: BLEU/chrF greedy and
	# beam 5, gold AER, speed, α's peak (bench/score_functions.py); the software test split cut to 1,048
	# evenly spaced messages, as the README's table
	models=; for seed in $(SCORE_SEEDS); do for score in $(SCORE_FUNCTIONS); do \
		run=runs/score-$$([ $$seed = 2026 ] || echo seed$$seed-)$$score; models="$$models --model $$run/model"; \
		test -f $$run/model/manifest.json && continue; \
		$(BIN)/attnmt train --config model/configs/rnnsearch-es-en-score-functions.yaml --score-function $$score \
			--seed $$seed --run $$run || exit 1; \
		$(BIN)/attnmt export --run $$run --out $$run/model --name $$(basename $$run) --no-shortlist || exit 1; \
	done; done; \
	$(BIN)/attnmt bench score-functions $$models --data $(DATA) $(SOFTWARE) tests/data/everyday --sentences 1048 \
		--repeats 5 --json runs/score-functions.json

# The RNNsearch into $(RNNSEARCH_MODEL). Refused without a run (checked before anything is installed):
# a newcomer has none, and the bundled model is already exported.
export: export-needs-a-run $(VENV)/.dev
	$(BIN)/attnmt export --run $(EXPORT_RUN) --checkpoint $(CHECKPOINT) --out $(RNNSEARCH_MODEL)
	# the lexical shortlist's dev BLEU change, measured through the serving engine, into the manifest
	$(BIN)/attnmt evaluate --shortlist-change --model $(RNNSEARCH_MODEL) --data $(MIXED)-copies
	# quality-estimation weights fitted on both dev sets (verses and messages), into the manifest
	$(BIN)/attnmt fit-quality --model $(RNNSEARCH_MODEL) --data $(DATA) $(SOFTWARE)
	# names it never learnt kept as written: the known-words list of its training source, with the dev change
	$(BIN)/attnmt fit-names --model $(RNNSEARCH_MODEL) --corpus $(MIXED)-copies/train.es --data $(QUALITY_DATA)
	# nouns and adjectives it never learnt or saw rarely translated by Apertium's dictionary, with the dev change
	$(BIN)/attnmt fit-lexicon --model $(RNNSEARCH_MODEL) --corpus $(MIXED)-copies/train.es --data $(QUALITY_DATA)
	$(BIN)/attnmt fit-first-word --model $(RNNSEARCH_MODEL) --data $(QUALITY_DATA)
	$(BIN)/attnmt fit-split --model $(RNNSEARCH_MODEL) --data $(QUALITY_DATA)

# The Transformer from its averaged checkpoint: every layer, head and reading (as predicted, or
# Shift-Att) scored on the gold set first, and the one with the lowest dev AER exported (or pass
# ALIGNMENT="--alignment-layer L --alignment-head H [--alignment-shift-att]"), then attnmt's fp32
# and int8 directories and CTranslate2's of the same weights (`attnmt bench ctranslate2` holds them
# against each other), the served hard-link rule chosen on the gold dev split, quality-estimation
# weights fitted on both dev sets, and the known-words list that keeps unknown names as written.
ALIGNMENT ?= --alignment-from $(TRANSFORMER_EXPORT_RUN)/heads.json
export-transformer: $(VENV)/.dev
	@test -f $(TRANSFORMER_EXPORT_RUN)/$(TRANSFORMER_CHECKPOINT) || $(BIN)/attnmt average \
		--run $(TRANSFORMER_EXPORT_RUN) --last $(TRANSFORMER_AVERAGE) --out $(TRANSFORMER_CHECKPOINT)
	$(BIN)/attnmt evaluate-alignment --run $(TRANSFORMER_EXPORT_RUN) --checkpoint $(TRANSFORMER_CHECKPOINT) \
		--json $(TRANSFORMER_EXPORT_RUN)/heads.json
	$(BIN)/attnmt export --run $(TRANSFORMER_EXPORT_RUN) --checkpoint $(TRANSFORMER_CHECKPOINT) \
		--out $(TRANSFORMER_EXPORT) --name transformer-es-en $(ALIGNMENT)
	$(BIN)/attnmt export --run $(TRANSFORMER_EXPORT_RUN) --checkpoint $(TRANSFORMER_CHECKPOINT) \
		--out $(TRANSFORMER_EXPORT)-int8 --name transformer-es-en --quantize int8 $(ALIGNMENT)
	$(BIN)/attnmt export --run $(TRANSFORMER_EXPORT_RUN) --checkpoint $(TRANSFORMER_CHECKPOINT) \
		--out $(TRANSFORMER_EXPORT)-ct2 --format ctranslate2
	$(BIN)/attnmt export --run $(TRANSFORMER_EXPORT_RUN) --checkpoint $(TRANSFORMER_CHECKPOINT) \
		--out $(TRANSFORMER_EXPORT)-ct2-int8 --format ctranslate2 --quantize int8
	$(BIN)/attnmt evaluate-alignment --model $(TRANSFORMER_EXPORT) --write-manifest
	$(BIN)/attnmt fit-names --model $(TRANSFORMER_EXPORT) --corpus data/es-en-general/train.es --data $(QUALITY_DATA)
	$(BIN)/attnmt fit-lexicon --model $(TRANSFORMER_EXPORT) --corpus data/es-en-general/train.es --data $(QUALITY_DATA)
	$(BIN)/attnmt fit-first-word --model $(TRANSFORMER_EXPORT) --data $(QUALITY_DATA)
	$(BIN)/attnmt fit-split --model $(TRANSFORMER_EXPORT) --data $(QUALITY_DATA)
	# the quality weights, last: fitted on the dev translations as served
	$(BIN)/attnmt fit-quality --model $(TRANSFORMER_EXPORT) --data $(QUALITY_DATA)

export-needs-a-run:
	@test -f $(EXPORT_RUN)/$(CHECKPOINT) || { echo "make export: no trained run in $(EXPORT_RUN) (no $(CHECKPOINT)); \
	\`make train\` makes one (hours). \`make serve\` and \`docker build\` need no export: \
	they use the model already in $(RNNSEARCH_MODEL)." >&2; exit 2; }

# Each bundled model rebuilt from its run, which only `make data` and `make train` make (hours on the
# CPU, and a GPU for the Transformer's last stage): refused without them. The RNNsearch: `make export`,
# its hard-link rule, its test-set scores into its manifest. The Transformer: `make export-transformer`
# into its run, that directory copied over $(DEFAULT_MODEL) (its model card kept, checkpoint.pt left
# out of git by .gitignore), its test-set scores into its manifest. Then the figures the docs show.
rebuild-models: rebuild-needs-runs $(VENV)/.dev
	$(MAKE) export
	# the bundled weights are stored as int8 (every test set within 0.3 BLEU of float16, docs/benchmarks.md)
	$(BIN)/attnmt store-weights $(RNNSEARCH_MODEL) --out $(RNNSEARCH_MODEL).stored
	rm -r $(RNNSEARCH_MODEL) && mv $(RNNSEARCH_MODEL).stored $(RNNSEARCH_MODEL)
	$(BIN)/attnmt evaluate-alignment --model $(RNNSEARCH_MODEL) --write-manifest
	$(MAKE) evaluate MODEL=$(RNNSEARCH_MODEL) EVALUATE_FLAGS=--write-manifest
	$(MAKE) export-transformer
	$(BIN)/attnmt store-weights $(TRANSFORMER_EXPORT) --out $(TRANSFORMER_EXPORT)-stored
	find $(TRANSFORMER_EXPORT)-stored -maxdepth 1 -type f ! -name MODEL_CARD.md -exec cp {} $(DEFAULT_MODEL)/ \;
	$(BIN)/attnmt evaluate-alignment --model $(DEFAULT_MODEL) --write-manifest
	$(MAKE) evaluate MODEL=$(DEFAULT_MODEL) EVALUATE_FLAGS=--write-manifest
	$(MAKE) docs-figures

rebuild-needs-runs:
	@test -f $(EXPORT_RUN)/$(CHECKPOINT) -a -f $(TRANSFORMER_EXPORT_RUN)/last.pt || { echo "make rebuild-models: \
	it needs the training runs $(EXPORT_RUN) ($(CHECKPOINT)) and $(TRANSFORMER_EXPORT_RUN) (last.pt), which \
	\`make data\` and \`make train\` make (hours; docs/training.md). The bundled models in $(RNNSEARCH_MODEL) \
	and $(DEFAULT_MODEL) are already exported." >&2; exit 2; }

# Statistical word links (eflomal, the `align` extra: GPL-3, a development tool, never served) of every
# training corpus, one Pharaoh line per pair in DIR/train.links (guided alignment reads them), and of the
# gold pairs; then AER on the gold set: eflomal beside every way the bundled model aligns.
GOLD ?= tests/data/gold-alignments
.PHONY: links
links: $(VENV)/.dev
	@$(BIN)/python -c "import eflomal" 2>/dev/null || $(PIP) -e '.[align]'
	$(BIN)/attnmt data links $(DATA) $(SOFTWARE) $(SOFTWARE)-copies $(MIXED) $(MIXED)-bible4 $(MIXED)-bible12 \
		$(MIXED)-copies data/prose data/backtranslation data/cldr $(MIXED)-everyday $(MIXED)-everyday2 $(MIXED)-everyday3 $(MIXED)-everyday4 \
		--gold $(GOLD) --gold-out data/gold-links
	# the general mixes, each its own run (the English→Spanish one with i indexing English words; the gold set is
	# Spanish→English, so not with it)
	$(BIN)/attnmt data links data/es-en-general
	$(BIN)/attnmt data links data/en-es-general --src en --tgt es
	$(BIN)/attnmt evaluate-alignment --model $(MODEL) --gold $(GOLD) --links eflomal=data/gold-links/{split}.links \
		--json data/gold-links/aer.json

# BLEU and chrF of $(MODEL) on each test set, greedy and beam 5, Apertium beside (EVALUATE_FLAGS=--write-manifest:
# recorded in its manifest, where the README's table reads them). DATA and SOFTWARE need `make data`.
EVALUATE_FLAGS ?=
evaluate: $(VENV)/.dev
	$(BIN)/attnmt evaluate --model $(MODEL) --data $(DATA) $(EVALUATE_FLAGS)
	$(BIN)/attnmt evaluate --model $(MODEL) --data $(SOFTWARE) $(EVALUATE_FLAGS)
	$(BIN)/attnmt evaluate --model $(MODEL) --data tests/data/everyday $(EVALUATE_FLAGS)

# The public test sets: FLORES-200 devtest and Tatoeba from tests/data/public (committed with their
# licences), plus any folder of NAME.spa/NAME.eng files in PUBLIC_TESTSETS, e.g. a copy of
# Helsinki-NLP/OPUS-MT-testsets' testsets/spa-eng/ for newstest2013 (WMT's terms keep it out of the
# repository). PUBLIC_MODELS and Apertium in one run: BLEU, chrF, paired bootstrap against the first
# model, the published OPUS-MT and NLLB figures (bench/published.json) beside them.
PUBLIC_TESTSETS ?=
PUBLIC_SETS ?= flores200-devtest newstest2013 tatoeba-test-v2021-08-07
PUBLIC_MODELS ?= models/transformer-es-en
PUBLIC_JSON ?= docs/public.json
.PHONY: benchmark-public
benchmark-public: $(VENV)/.dev
	@dpkg -s apertium apertium-eng-spa >/dev/null 2>&1 \
		|| (apt-get update -q && apt-get install -y -q apertium apertium-eng-spa) \
		|| echo "Apertium could not be installed: its column will be skipped"
	$(BIN)/attnmt evaluate-public --testsets tests/data/public $(foreach d,$(PUBLIC_TESTSETS),--testsets $(d)) \
		$(foreach s,$(PUBLIC_SETS),--set $(s)) $(foreach m,$(PUBLIC_MODELS),--model $(m)) --json $(PUBLIC_JSON)

# $(MODEL) on $(BENCH_DATA): PyTorch against ONNX Runtime (bench engine), `attnmt translate` against Apertium
# (Debian `apertium`, `apertium-eng-spa`, bench offline's baseline), the server against the offline engine
# (bench serving). Works from a clone: bench engine reads a Transformer's PyTorch weights back from its graphs
# where checkpoint.pt is absent; an RNNsearch's cannot be, so without its checkpoint.pt (`make export`, from a
# run) that step is skipped with a message. A smoke run: `make bench BENCH_SENTENCES=8 BENCH_REPEATS=1`.
BENCH_SIZE = $(if $(BENCH_SENTENCES),--sentences $(BENCH_SENTENCES)) $(if $(BENCH_REPEATS),--repeats $(BENCH_REPEATS))
bench: $(VENV)/.dev
	@dpkg -s apertium apertium-eng-spa >/dev/null 2>&1 \
		|| (apt-get update -q && apt-get install -y -q apertium apertium-eng-spa) \
		|| echo "Apertium could not be installed: bench offline will skip it"
	@if [ -f $(MODEL)/checkpoint.pt ] || grep -q '"architecture": "Transformer"' $(MODEL)/manifest.json; then \
		echo "$(BIN)/attnmt bench engine --model $(MODEL) --data $(BENCH_DATA) $(BENCH_SIZE)"; \
		$(BIN)/attnmt bench engine --model $(MODEL) --data $(BENCH_DATA) $(BENCH_SIZE); \
	else echo "bench engine skipped: $(MODEL) is an RNNsearch without checkpoint.pt, which \`make export\` writes \
	from its training run"; fi
	$(BIN)/attnmt bench offline --model $(MODEL) --data $(BENCH_DATA) $(BENCH_SIZE)
	$(BIN)/attnmt bench serving --model $(MODEL) --data $(BENCH_DATA) $(BENCH_SIZE)

# Not in CI: 10 minutes at half capacity with a mixed load (bench/soak.py); fails if resident
# memory grows 5 % or more, or any call ends with an outcome its kind does not allow.
# `attnmt bench overload` (bench/overload.py) is the overload figure, run by hand.
soak: $(VENV)/.dev
	$(BIN)/attnmt bench soak --model $(MODEL) --data $(BENCH_DATA) --duration 600

stubs: $(VENV)/.dev
	$(BIN)/python proto/generate_stubs.py

# buf's linter on proto/ (its rules and exceptions: proto/buf.yaml), from npm's @bufbuild/buf at this
# version (npx fetches it once); tests/architecture/test_proto_lint.py runs the same.
BUF_VERSION ?= 1.75.0
lint-proto:
	@command -v npx >/dev/null || apt-get install -y -q npm
	cd proto && npx --yes @bufbuild/buf@$(BUF_VERSION) lint

# The generated parts of README.md, docs/*.md and models/*/MODEL_CARD.md: figures from the manifests,
# docs/measured.json and docs/public.json (make benchmark-public), and the settings table (bench/docs.py).
.PHONY: docs-figures
docs-figures: $(VENV)/.dev
	$(BIN)/python -m attnmt.bench.docs

# The serving image's dependency locks, deploy/requirements/{cpu,gpu,openvino}.txt: one for each
# ONNX Runtime build the Dockerfile's ORT argument names, resolved by pip for the image's
# interpreter (deploy/lock_requirements.py says how). Pins pyproject.toml still allows are kept;
# `make lock UPGRADE=1` resolves every package afresh.
.PHONY: lock
lock: $(BIN)/python
	$(BIN)/python deploy/lock_requirements.py $(if $(UPGRADE),--upgrade)

clean:
	rm -rf $(VENV) build *.egg-info
