"""The suite's slow tier: end-to-end checks (training runs in subprocesses, kills and resumes,
sweeps, Ray, whole config trees) that `make test` leaves to `make test_slow` so that it stays under
10 minutes on 2 cores; CI runs both (.ci/run). tests/conftest.py marks these `slow`; a name here
that the session collects no test for fails the session, so the list cannot rot.

Seconds are each test's own time in `make test` on a fresh clone of 78e8684 (2026-11-27, 2 CPU
cores, x86_64 AVX2-only AMD EPYC, pytest --durations): every test of 5 s or more there, but the
golden runs of the paper's models and of the dynamics system and the unit checks of the models
and analyses against closed forms and NumPy, which stay in `make test`. Entries added since say
where their seconds come from."""

# whole files: every test in them trains, kills or resumes runs, most of them in subprocesses
# (seconds: their tests among the suite's 150 slowest)
SLOW_FILES = {
    "tests/test_resume.py": 446,  # 387, plus lm_hybrid's two tests added since (59 s alone, 2026-11-27)
    "tests/test_ray.py": 83,
    "tests/test_faults.py": 123,
    "tests/test_read_back.py": 47,
    "tests/test_sweeps.py": 66,
    "tests/test_v1_rundirs.py": 42,
}

SLOW_TESTS = {
    # make test took 1046 s on a fresh checkout of b971dde on a slower machine (2 cores, Intel family 6
    # model 167, 2026-12-02, pytest --durations): these end-to-end runs, subprocess refusals and the
    # larger of parametrised equivalence checks (the others stay) join; seconds are theirs there
    "tests/test_matrix.py::test_chunked_mixers_get_chunks_balanced_to_the_prompt_and_compute_the_same_map": 48.1,
    "tests/test_extending.py::test_the_pages_commands_run_as_written_in_the_scratch_copy": 46.8,
    "tests/test_read_side.py::test_an_lm_pair_run_writes_the_pair_analyses_at_its_end": 37.9,
    "tests/test_matrix.py::test_query_sensitivity_is_each_prompts_own_gradient[softmax_causal]": 29.6,
    "tests/test_bayes.py::test_the_icl_curve_of_a_pooled_noisy_run_draws_dmmse_over_its_pool_and_ridge": 29.0,
    "tests/test_read_side.py::test_every_evaluation_shift_applies_to_every_system_that_answers_pair_prompts": 21.3,
    "tests/test_zoology_block.py::test_dropout_draws_masks_in_training_only_from_a_per_step_key": 21.0,
    "tests/test_positions.py::test_gpt2_with_a_non_table_encoding_predicts_past_its_trained_length[sinusoidal]": 17.2,
    "tests/test_markov.py::test_bad_options_one_line_exit_2": 16.5,
    "tests/test_extending.py::test_the_generic_test_builds_the_new_mixer_task_and_analysis": 16.1,
    "tests/test_zoo_rwkv7.py::test_the_factorised_chunks_are_the_elementwise_ones_at_rwkv7s_decays[64-16]": 15.8,
    "tests/test_paper_form.py::test_the_paper_model_trains_on_a_pair_task[sparse_linear_regression]": 14.9,
    "tests/test_pools.py::test_the_papers_own_system_trains_on_a_pool_of_tasks_or_of_prompts": 13.2,
    "tests/test_hostile_inputs.py::test_resume_of_a_finished_run_is_refused_and_changes_nothing": 11.9,
    "tests/test_mad.py::test_listed_in_choices_and_bad_options_exit_2": 10.8,
    "tests/test_paper_form.py::test_the_paper_model_trains_on_a_pair_task[relu_2nn_regression]": 8.6,
    # a gpt2 run trained 20 steps in a subprocess, then the analysis and its refusals (41 s on 2
    # cores, pytest --durations, 2026-12-02); two gpt2 runs of 20 steps and the probes (37 s)
    "tests/test_algorithm_selection.py::test_the_analysis_on_a_run_and_its_refusals": 41.2,
    "tests/test_probes.py::test_the_analysis_on_a_run_and_its_refusals": 36.5,
    # two 2-step recipe runs in subprocesses and the induction analysis on them (102 s on 2 cores
    # shared with a study, 2026-12-02; about 40 s alone by the recipe runs' usual start-up)
    "tests/test_induction.py::test_the_analysis_on_a_run_and_its_refusals": 40.0,
    # the induction preset trained 4 steps with its Markov extras (pytest --durations, 2 cores,
    # 2026-12-02, alone: compile-bound); make test at 79bb948 took 588.7 s on a fresh clone
    "tests/test_markov.py::test_induction_preset_trains_a_few_steps": 16.4,
    # Ctrl-C on --overwrite and its resume, and the analysis budget end to end with its 20 s run
    # (pytest --durations, 2 cores, 2026-11-29, alone; setup included)
    (
        "tests/test_overwrite_resume.py::"
        "test_ctrl_c_on_overwrite_keeps_both_runs_and_overwrite_resume_finishes_the_new_one"
    ): 44.0,
    (
        "tests/test_overwrite_resume.py::"
        "test_overwrite_resume_with_nothing_kept_or_other_settings_is_refused_in_one_line"
    ): 14.3,
    "tests/test_budget.py::test_over_budget_the_analyses_read_the_first_tasks_and_say_so": 41.0,
    "tests/test_budget.py::test_a_run_whose_training_would_not_fit_here_is_still_read_back": 0.6,
    # the notebook example on a trained demo run and the extending guide's trained run (pytest
    # --durations, 2 cores, 2026-11-29: setup 34.0 s of the module's run, then 12.0, 0.1 and 27.0 s):
    # make test took 613.5 s at 924f674 with them
    "tests/test_notebook.py::test_the_docs_example_runs_and_draws_the_curve_the_analysis_wrote": 46.0,
    "tests/test_notebook.py::test_prompts_of_the_wrong_shape_are_refused_in_one_line": 0.1,
    "tests/test_extending.py::test_a_run_trains_with_the_new_mixer_on_the_new_task_and_the_new_analysis_reads_it": 27.0,
    # the guide's study, its quick test in the scratch copy (pytest --durations, 2 cores, 2026-12-01,
    # beside the studies tier): two 40-step runs and the report
    "tests/test_extending.py::test_the_pages_study_runs_its_quick_test_in_the_scratch_copy": 79.2,
    # a finite pool through runners.train (2 cores, 2026-11-27, while a study ran on both cores)
    "tests/test_pools.py::test_a_limits_of_icl_config_with_num_tasks_64_trains": 46.8,
    # Garg's LSTM through runners.train (2 cores, 2026-11-28, while a study ran on both cores)
    "tests/test_lstm.py::test_an_lstm_config_trains_through_runners_train": 18.3,
    # Zoology's mixers end to end: recipe, GPT-2 YAML, length-study layout (2 cores, 2026-11-27, beside other work)
    (
        "tests/test_zoo_mixers.py::"
        "test_each_trains_three_steps_through_the_recipe_and_a_gpt2_or_length_study_layout[gated_delta_net]"
    ): 73.6,
    (
        "tests/test_zoo_mixers.py::"
        "test_each_trains_three_steps_through_the_recipe_and_a_gpt2_or_length_study_layout[short_conv]"
    ): 72.6,
    (
        "tests/test_zoo_mixers.py::"
        "test_each_trains_three_steps_through_the_recipe_and_a_gpt2_or_length_study_layout[delta_net]"
    ): 65.5,
    (
        "tests/test_zoo_mixers.py::"
        "test_each_trains_three_steps_through_the_recipe_and_a_gpt2_or_length_study_layout[h3]"
    ): 58.5,
    (
        "tests/test_zoo_mixers.py::"
        "test_each_trains_three_steps_through_the_recipe_and_a_gpt2_or_length_study_layout[rwkv7]"
    ): 57.9,
    (
        "tests/test_zoo_mixers.py::"
        "test_each_trains_three_steps_through_the_recipe_and_a_gpt2_or_length_study_layout[hyena]"
    ): 57.6,
    (
        "tests/test_zoo_mixers.py::"
        "test_each_trains_three_steps_through_the_recipe_and_a_gpt2_or_length_study_layout[mamba2]"
    ): 50.7,
    (
        "tests/test_zoo_mixers.py::"
        "test_each_trains_three_steps_through_the_recipe_and_a_gpt2_or_length_study_layout[base_conv]"
    ): 44.8,
    (
        "tests/test_zoo_mixers.py::"
        "test_each_trains_three_steps_through_the_recipe_and_a_gpt2_or_length_study_layout[based]"
    ): 36.4,
    # measured in make test on a fresh clone of 78e8684
    "tests/test_golden_systems.py::test_golden_system_run_matches_its_record[recipe_mqar_gla]": 92.7,
    # its stand-in on a machine without the MQAR run's record (ONE_OF); not timed separately
    "tests/test_golden_systems.py::test_golden_system_run_matches_its_record[recipe_regression_attention]": 92.7,
    "tests/test_golden_systems.py::test_golden_system_run_matches_its_record[gpt2_fire_curriculum]": 63.4,
    "tests/test_backbones.py::test_a_llama2_config_in_the_originals_keys_trains": 58.0,
    "tests/test_step_settings.py::test_tf32_is_float32_on_a_cpu_and_the_flat_update_its_rounding": 54.8,
    "tests/test_garg.py::test_analyses_say_when_they_run_and_skip_analysis_leaves_them_out": 46.4,
    "tests/test_recipe.py::test_recipe_trains_and_writes_accuracy_and_examples": 43.8,
    "tests/test_loop.py::test_step_flops_counts_forward_backward_and_scales_with_the_batch": 40.8,
    "tests/test_scored_logits.py::test_scored_logits_give_the_loss_and_gradients_of_all_logits[task0]": 38.8,
    (
        "tests/test_length_study_configs.py::"
        "test_a_copy_of_the_tree_trains_through_runners_train[conjunction-mamba-True]"
    ): 35.1,
    "tests/test_lengthgen.py::test_recorded_attention_is_causal_normalised_and_leaves_predictions_unchanged": 35.1,
    "tests/test_dense_layout.py::test_training_agrees_to_float32_rounding": 32.5,
    "tests/test_backbones.py::test_a_mamba_config_in_the_originals_keys_trains": 29.4,
    (
        "tests/test_length_study_configs.py::"
        "test_a_copy_of_the_tree_trains_through_runners_train[linear_regression-fire-False]"
    ): 24.9,
    (
        "tests/test_one_writer.py::"
        "test_two_runs_at_once_on_one_run_directory_one_trains_the_other_is_refused[--overwrite]"
    ): 23.7,
    "tests/test_scored_logits.py::test_scored_logits_give_the_loss_and_gradients_of_all_logits[task1]": 23.3,
    "tests/test_scored_logits.py::test_training_with_scored_logits_tracks_all_logits": 22.9,
    "tests/test_lengthgen.py::test_recency_applies_exactly_where_the_mixer_forms_softmax_weights": 22.3,
    "tests/test_loop.py::test_same_seed_same_metrics_and_chunking_changes_nothing": 21.0,
    "tests/test_recipe.py::test_pair_task_scores_match_numpy[conjunction-sign]": 20.7,
    "tests/test_runners.py::test_ctrl_c_leaves_no_half_written_file": 20.3,
    "tests/test_dense_layout.py::test_layouts_share_parameters_and_compute_the_same_function[gpt2 softmax]": 18.6,
    "tests/test_registry_entries.py::test_registry_entry_builds_jits_and_has_documented_shapes[family-sequence]": 18.6,
    "tests/test_dense_layout.py::test_layouts_share_parameters_and_compute_the_same_function[lm gla tokens]": 18.5,
    "tests/test_nonlinear.py::test_settings_round_trip_and_training_is_deterministic_and_learns": 17.7,
    "tests/test_runners.py::test_overwrite_replaces_our_own_run_directory": 17.6,
    "tests/test_lengthgen.py::test_recency_refuses_a_mixer_with_state_but_no_softmax_weights_in_one_line": 17.4,
    "tests/test_together.py::test_a_diverging_seed_sends_the_group_back_to_training_alone": 17.3,
    "tests/test_runners.py::test_run_directory_is_complete[runners.run_softmax_copy]": 16.9,
    (
        "tests/test_one_writer.py::test_two_runs_at_once_on_one_run_directory_one_trains_the_other_is_refused[--resume]"
    ): 16.3,
    "tests/test_dynamics_command_line.py::test_readme_loops_make_one_run_each_named_as_the_original": 15.2,
    "tests/test_batched.py::test_the_model_and_the_baselines_in_blocks_give_the_numbers_of_one_batch": 14.8,
    "tests/test_runners.py::test_run_directory_is_complete[runners.run_concat_inputs_targets]": 14.4,
    "tests/test_batched.py::test_length_test_takes_fewer_tasks_and_refuses_what_cannot_fit_in_one_line": 13.7,
    "tests/test_step_settings.py::test_fused_attention_computes_the_einsums_function[softmax_causal]": 13.7,
    "tests/test_paper_scale.py::test_parallel_runs_count_against_free_memory": 13.2,
    "tests/test_state_space.py::test_mamba_runs_in_every_pairs_preset[gpt2]": 12.3,
    (
        "tests/test_hostile_inputs.py::"
        "test_resume_from_a_checkpoint_with_nan_parameters_is_refused_and_rundir_says_corrupt"
    ): 12.2,
    "tests/test_positions.py::test_gpt2_with_a_non_table_encoding_predicts_past_its_trained_length[nope]": 11.8,
    "tests/test_loop.py::test_a_slow_step_of_a_small_model_starts_with_a_one_step_chunk": 11.3,
    (
        "tests/test_bad_inputs.py::"
        "test_bad_input_is_one_line_before_any_work[151-train---config_configs/quick.yaml_--resume_--o]"
    ): 11.0,
    (
        "tests/test_registry_entries.py::"
        "test_registry_entry_builds_jits_and_has_documented_shapes[family-attention_only]"
    ): 9.7,
    "tests/test_state_space.py::test_mamba_in_the_recipe_model": 9.6,
    "tests/test_registry_entries.py::test_registry_entry_builds_jits_and_has_documented_shapes[system-lm]": 9.6,
    "tests/test_dynamics_command_line.py::test_the_seed_command_lines_run[argv0]": 8.8,
    "tests/test_nonlinear.py::test_kernel_baselines_closed_forms_and_tuning": 8.6,
    "tests/test_registry_entries.py::test_registry_entry_builds_jits_and_has_documented_shapes[seq_mixer-mamba]": 8.2,
    "tests/test_gd_plus.py::test_fitted_gd_plus_beats_tuned_gd_with_two_layers": 8.2,
    "tests/test_scored_logits.py::test_scored_positions_are_every_scored_position_in_order": 7.9,
    "tests/test_dense_layout.py::test_layouts_share_parameters_and_compute_the_same_function[mamba]": 7.7,
    "tests/test_recipe.py::test_recipe_choices_and_help_list_the_components_and_their_options": 7.6,
    "tests/test_dynamics_command_line.py::test_the_seed_command_lines_run[argv3]": 7.5,
    "tests/test_step_settings.py::test_fused_attention_leaves_encodings_that_adjust_the_scores_to_the_einsums": 7.3,
    "tests/test_recipe_names.py::test_uniform_filler_is_any_token_but_zero_keys_included": 7.1,
    "tests/test_recipe.py::test_pair_task_scores_match_numpy[linear_regression-real]": 6.9,
    "tests/test_local_executor.py::test_runs_side_by_side_get_a_core_each_and_share_cores_keeps_every_core": 6.8,
    "tests/test_file_modes.py::test_run_artifacts_follow_the_umask[2-436]": 6.8,
    "tests/test_nonlinear.py::test_features_gd_trains_through_the_system": 6.7,
    "tests/test_recipe.py::test_chunked_recurrence_equals_the_step_by_step_form_and_a_numpy_loop[data]": 6.7,
    "tests/test_registry_entries.py::test_registry_entry_builds_jits_and_has_documented_shapes[system-gpt2]": 6.7,
    "tests/test_file_modes.py::test_run_artifacts_follow_the_umask[18-420]": 6.7,
    "tests/test_garg.py::test_training_pair_curriculum_corrupts_places_and_masks": 6.4,
    "tests/test_garg.py::test_relu_2nn_and_decision_tree_against_numpy": 6.3,
    "tests/test_together.py::test_the_paper_systems_seeds_together_agree_with_each_alone": 6.1,
    "tests/test_recipe.py::test_state_mixer_sizes": 6.0,
    "tests/test_cli.py::test_output_into_a_closed_pipe_stops_quietly[argv0-141]": 5.7,
    "tests/test_reproduce.py::test_bad_flags_one_line[flags2-repeats a value]": 5.7,
    "tests/test_dynamics.py::test_same_settings_same_trajectory_bit_for_bit": 5.6,
    "tests/test_nonlinear.py::test_random_mlp_tasks_are_piecewise_linear_with_at_most_h_kinks": 5.6,
    (
        "tests/test_registry_entries.py::"
        "test_registry_entry_builds_jits_and_has_documented_shapes[nonlinear_model-features_gd]"
    ): 5.4,
    "tests/test_reproduce.py::test_bad_flags_one_line[flags1---ks=1 is out of range]": 5.4,
    "tests/test_dynamics_command_line.py::test_the_seed_command_lines_run[argv1]": 5.4,
    "tests/test_reproduce.py::test_bad_flags_one_line[flags3---steps-scale='0' is not accepted]": 5.4,
    "tests/test_recipe.py::test_mqar_noise_filler_never_adds_a_key": 5.3,
    "tests/test_registry_entries.py::test_registry_entry_builds_jits_and_has_documented_shapes[seq_mixer-favor]": 5.2,
    "tests/test_garg.py::test_tasks_and_curriculum_masks": 5.2,
    "tests/test_mechanisms.py::test_favor_approaches_exact_softmax_as_features_grow": 5.2,
    (
        "tests/test_registry_entries.py::"
        "test_registry_entry_builds_jits_and_has_documented_shapes[seq_mixer-gated_linear_attn]"
    ): 5.1,
    "tests/test_recipe.py::test_every_sequence_mixer_is_causal[favor]": 5.1,
    "tests/test_reproduce.py::test_bad_flags_one_line[flags4---distractors=11 is out of range]": 5.1,
}

# tests of which a machine collects exactly one (tests/test_golden_systems.py: the recipe's MQAR run
# is compared only on a machine with its record, elsewhere its regression run stands in): a
# session that collects the file must collect at least one of each group
ONE_OF = (
    {
        "tests/test_golden_systems.py::test_golden_system_run_matches_its_record[recipe_mqar_gla]",
        "tests/test_golden_systems.py::test_golden_system_run_matches_its_record[recipe_regression_attention]",
    },
)
