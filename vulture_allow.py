"""Names vulture cannot see used (``.ci/run``'s dead-code step reads this file with the code).

Each entry is used from outside Python's call graph; the comment says by whom. Pydantic's
``@field_validator``/``@model_validator`` and SQLAlchemy's ``@event.listens_for`` functions are
skipped by the step's ``--ignore-decorators`` instead. Never imported or run.
"""

# ruff: noqa: B018, F821

# --- called by a framework, by name ---------------------------------------------------------
_.model_config  # pydantic reads each model's settings (extra="forbid", frozen)
_.cache_ok  # SQLAlchemy reads it on a TypeDecorator (UTCDateTime) before caching its SQL
_.process_bind_param  # SQLAlchemy TypeDecorator hook: a value on its way into the database
_.process_result_value  # SQLAlchemy TypeDecorator hook: a value read back from the database
_.isolation_level  # set on the sqlite3 DBAPI connection, which reads it (store/migrating.py)
_.connection_made  # asyncio.Protocol callback (http_client/connection.py, bench/loadgen.py)
_.data_received  # asyncio.Protocol callback
_.resume_writing  # asyncio.Protocol flow-control callback
_.eof_received  # asyncio.Protocol callback
_.connection_lost  # asyncio.Protocol callback
_.exc_type  # __exit__/__aexit__ parameters: the context-manager protocol's signature
_.tb  # __aexit__ parameter (load/client.py): the context-manager protocol's signature
_.autogen_context  # Alembic's render_item callback signature (migrations/env.py)
_.downgrade  # Alembic runs each migration's downgrade() by name
_.down_revision  # Alembic reads each migration's revision chain
_.branch_labels  # Alembic migration metadata
_.depends_on  # Alembic migration metadata
_.pre_tokenizer  # read by the tokenizers library (bench/vllm_server.py builds a tokenizer.json)
_.post_processor  # read by the tokenizers library (bench/vllm_server.py)

# --- public entry points outside the package's own calls -------------------------------------
_.save_host_job  # docs/multihost.md: a load host's share, written for `python -c` on that host
_.run_host_share  # docs/multihost.md: what each load host runs (`python -c`, in tests too)
_.leftover_processes  # bench/vllm_server.py: the probe the vLLM tests assert is empty
_.forget_secrets  # docs/security.md: a clean redaction registry (tests/conftest.py, each test)
_.resamples  # compare_samples() keeps accepting it for old callers (docs/analysis.md)
_.FIXED  # a RegressionStatus the dashboard's triage form sets by value: RegressionStatus(status)

# --- columns and fields, written and read by name, not by attribute --------------------------
_.source_path  # ORM column (config and suite versions): the file each came from, as saved
_.schema_version  # ORM column of runs: the stored result's schema version
_.ttft_count  # ORM column: samples behind a latency's statistics, saved from LatencyStats.count
_.tpot_count  # ORM column, as ttft_count
_.itl_count  # ORM column, as ttft_count
_.e2el_count  # ORM column, as ttft_count
_.memory_util_pct  # GpuSample field and its column: copied by name (_SAMPLE_FIELDS), exported
_.sm_clock_mhz  # GpuSample field and its column, as memory_util_pct
_.temperature_c  # GpuSample field and its column, as memory_util_pct
_.swap_space  # pydantic config field: a vLLM flag, passed on through model_dump()
_.max_lora_rank  # pydantic config field: a vLLM flag, passed on through model_dump()
_.subject  # pydantic field of a quality set's line: allowed (extra="forbid"), kept out of prompts
_.weights_memory_bytes  # StartupFacts field: stored with the run by as_environment() (asdict)
_.model_load_s  # StartupFacts field, as weights_memory_bytes
_.kv_cache_memory_bytes  # StartupFacts field, as weights_memory_bytes
_.kv_cache_tokens  # StartupFacts field, as weights_memory_bytes
_.num_requests_running  # the simulator's engine stats: served on its /metrics by name
_.num_requests_waiting  # the simulator's engine stats, as num_requests_running
_.num_preemptions  # the simulator's engine stats, as num_requests_running
_.kv_cache_capacity_bytes  # the simulator's engine stats, as num_requests_running
_.kv_cache_used_bytes  # the simulator's engine stats, as num_requests_running
_.kv_cache_peak_used_bytes  # the simulator's engine stats, as num_requests_running
_.adjusted_p_values  # a family verdict's Holm-adjusted p-values: part of its result (tests read it)
_.data_files  # a loaded suite's data files and their sha256, checked by the suite's tests
_.sim_run_factor  # the embedded simulator's speed draw for a run, kept on the target's handle
_.first_started_at  # StoreSummary: the stored runs' time span, part of the summary value
_.last_started_at  # StoreSummary, as first_started_at
_.base_body  # BisectCandidate: the base config's body, beside head_body, for the bisection
_.kv_peak_bytes  # WalkMeasurement: a walk step's peak KV-cache memory, beside weights_bytes
_.nuisances  # bench/fleet_histories.py: what shapes a labelled history, for reading a case
_.accepted_tokens  # read by name for vllm:spec_decode_num_accepted_tokens (sim/prometheus.py)
_.expected_tokens_per_step  # the drafter model's analytic mean, which the tests hold the simulated counts to
_.resident  # the adapters held, in eviction order: what tests/sim read to check the LRU
