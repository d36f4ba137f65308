// workflow start | list | show | cancel | retry | signal, and schedule create | drop | list | tick
// (docs/workflows.md, "Operating workflows"): start a run, see runs and a run's journal, the
// operator's two actions on a run, a signal to a run, and the schedules that start runs.
#include <iostream>
#include <optional>

#include "cli.hpp"
#include "exit_codes.hpp"
#include "json_writer.hpp"

namespace forgeyard::cli {

namespace {

struct WorkflowArgs {
  std::string tenant, workflow, run_key, run_id;
  int version = 1;
  std::string input = "{}";
  std::string deadline, priority, parent, retention, reason, state, signal, payload = "{}", signal_id;
  int max_runs = 100;
  bool json = false;
};

void print_status(const std::string& run_id, const RunStatus& s) {
  std::cout << "run_id=" << run_id << "\nstate=" << s.state << "\nworkflow=" << s.workflow << "@" << s.version
            << "\nowner=" << s.owner.value_or("") << "\nepoch=" << s.epoch << "\nupdated_at=" << iso(s.updated_at)
            << "\nresult=" << s.result.value_or("") << "\nerror=" << s.error.value_or("") << "\n";
}

}  // namespace

void add_workflow_commands(CLI::App& app, Commands& commands) {
  auto a = std::make_shared<WorkflowArgs>();
  CLI::App* wf = app.add_subcommand("workflow", "durable workflows: start runs, inspect them, cancel, retry");
  wf->require_subcommand(1);
  auto add_run = [&](CLI::App& c) {
    c.add_option("TENANT", a->tenant, "the tenant")->required();
    c.add_option("RUN_ID", a->run_id, "the run's id")->required();
  };

  CLI::App* start = wf->add_subcommand("start", "start a run (the same RUN_KEY and input return the first run)");
  start->add_option("TENANT", a->tenant, "the tenant")->required();
  start->add_option("WORKFLOW", a->workflow, "the workflow's name")->required();
  start->add_option("VERSION", a->version, "the workflow's version (>= 1)")->required();
  start->add_option("RUN_KEY", a->run_key, "the caller's key of the run")->required();
  start->add_option("--input", a->input, "the run's input, JSON")->type_name("JSON")->capture_default_str();
  start->add_option("--deadline", a->deadline, "end the run timed_out if it has not finished by then")->type_name("D");
  start->add_option("--priority", a->priority, "the class of its messages (default interactive)")->type_name("P");
  start->add_option("--parent", a->parent, "the run that started it")->type_name("RUN_ID");
  start->add_option("--retention", a->retention, "keep the run this long once it finished (default 30d)")
      ->type_name("D");
  commands.on(start, [a](Context& ctx) {
    WorkflowStartOptions o;
    if (!a->deadline.empty()) o.deadline = parse_duration(a->deadline);
    if (!a->priority.empty()) o.priority = priority_from_string(a->priority);
    if (!a->parent.empty()) o.parent = a->parent;
    if (!a->retention.empty()) o.retention = parse_duration(a->retention);
    const auto run_id = ctx.store().workflows().start(a->tenant, a->workflow, a->version, a->run_key, a->input, o);
    std::cout << "run_id=" << run_id << "\n";
    return exit_done;
  });

  CLI::App* list = wf->add_subcommand("list", "the tenant's runs, most recently changed first");
  list->add_option("TENANT", a->tenant, "the tenant")->required();
  list->add_option("--state", a->state, "only runs in this state (running, failed, parked, ...)")->type_name("S");
  list->add_option("--max", a->max_runs, "at most this many runs (1..1000)")->type_name("N")->capture_default_str();
  list->add_flag("--json", a->json, "one JSON object instead of key=value lines");
  commands.on(list, [a](Context& ctx) {
    const auto runs = ctx.store().workflows().list(a->tenant, a->state.empty() ? std::nullopt : std::optional(a->state),
                                                   a->max_runs, ctx.read());
    if (a->json) {
      JsonWriter j;
      j.begin_object().key("runs").begin_array();
      for (const RunSummary& r : runs) {
        j.begin_object()
            .field("run_id", r.run_id)
            .field("run_key", r.run_key)
            .field("workflow", r.workflow)
            .field("version", r.version)
            .field("state", r.state)
            .field("epoch", r.epoch)
            .field("updated_at", iso(r.updated_at));
        j.key("owner");
        r.owner ? j.value(*r.owner) : j.null();
        j.key("error");
        r.error ? j.value(*r.error) : j.null();
        j.end_object();
      }
      j.end_array().end_object();
      std::cout << j.str() << "\n";
    } else {
      for (const RunSummary& r : runs)
        std::cout << "run=" << r.run_id << " key=" << r.run_key << " workflow=" << r.workflow << "@" << r.version
                  << " state=" << r.state << " owner=" << r.owner.value_or("") << " epoch=" << r.epoch
                  << " updated_at=" << iso(r.updated_at) << "\n";
      std::cout << "runs=" << runs.size() << "\n";
    }
    return exit_done;
  });

  CLI::App* show = wf->add_subcommand("show", "a run's state and its journal");
  add_run(*show);
  show->add_flag("--json", a->json, "one JSON object instead of key=value lines");
  commands.on(show, [a](Context& ctx) {
    const RunStatus s = ctx.store().workflows().status(a->tenant, a->run_id, ctx.read());
    const auto journal = ctx.store().workflows().journal(a->tenant, a->run_id, ctx.read());
    if (a->json) {
      JsonWriter j;
      j.begin_object()
          .field("run_id", a->run_id)
          .field("state", s.state)
          .field("workflow", s.workflow)
          .field("version", s.version)
          .field("epoch", s.epoch)
          .field("updated_at", iso(s.updated_at));
      j.key("owner");
      s.owner ? j.value(*s.owner) : j.null();
      j.key("result");
      s.result ? j.raw(*s.result) : j.null();
      j.key("error");
      s.error ? j.value(*s.error) : j.null();
      j.key("journal").begin_array();
      for (const JournalEntry& e : journal) {
        j.begin_object()
            .field("position", e.position)
            .field("step", e.step)
            .field("status", e.status)
            .field("attempts", e.attempts)
            .field("epoch", e.epoch)
            .field("recorded_at", iso(e.recorded_at));
        j.key("result");
        e.result ? j.raw(*e.result) : j.null();
        j.key("error");
        e.error ? j.value(*e.error) : j.null();
        j.key("compensation");
        e.compensation ? j.value(*e.compensation) : j.null();
        j.key("compensation_status");
        e.compensation_status ? j.value(*e.compensation_status) : j.null();
        j.key("compensation_error");
        e.compensation_error ? j.value(*e.compensation_error) : j.null();
        j.end_object();
      }
      j.end_array().end_object();
      std::cout << j.str() << "\n";
    } else {
      print_status(a->run_id, s);
      for (const JournalEntry& e : journal)
        std::cout << "step." << e.position << "=" << e.step << " status=" << e.status << " attempts=" << e.attempts
                  << " epoch=" << e.epoch << " result=" << e.result.value_or("") << " error=" << e.error.value_or("")
                  << (e.compensation
                          ? " compensation=" + *e.compensation +
                                " compensated=" + e.compensation_status.value_or("no") +
                                (e.compensation_error ? " compensation_error=" + *e.compensation_error : std::string())
                          : std::string())
                  << "\n";
    }
    return exit_done;
  });

  CLI::App* cancel = wf->add_subcommand("cancel", "cancel a run that has not finished (exit 1 if it had)");
  add_run(*cancel);
  cancel->add_option("--reason", a->reason, "recorded as the run's error")->type_name("TEXT");
  commands.on(cancel, [a](Context& ctx) {
    const bool cancelled = ctx.store().workflows().cancel(a->tenant, a->run_id, a->reason);
    std::cout << "cancelled=" << (cancelled ? "true" : "false") << "\n";
    return cancelled ? exit_done : exit_no;
  });

  CLI::App* signal =
      wf->add_subcommand("signal", "send a signal to a run (exit 1 for a repeated --id or a run that has finished)");
  add_run(*signal);
  signal->add_option("SIGNAL", a->signal, "the signal's name, as the run waits for it")->required();
  signal->add_option("--payload", a->payload, "the signal's payload, JSON")->type_name("JSON")->capture_default_str();
  signal->add_option("--id", a->signal_id, "the signal's id (a uuid): sending it again does nothing")
      ->type_name("UUID");
  commands.on(signal, [a](Context& ctx) {
    const bool sent =
        ctx.store().workflows().signal(a->tenant, a->run_id, a->signal, a->payload,
                                       a->signal_id.empty() ? std::nullopt : std::optional<std::string>(a->signal_id));
    std::cout << "sent=" << (sent ? "true" : "false") << "\n";
    return sent ? exit_done : exit_no;
  });

  CLI::App* retry = wf->add_subcommand(
      "retry",
      "hand a failed or parked run out again, or resume a compensation_failed run's compensations (exit 1 "
      "for other states)");
  add_run(*retry);
  commands.on(retry, [a](Context& ctx) {
    const bool retried = ctx.store().workflows().retry(a->tenant, a->run_id);
    std::cout << "retried=" << (retried ? "true" : "false") << "\n";
    return retried ? exit_done : exit_no;
  });
}

void add_schedule_commands(CLI::App& app, Commands& commands) {
  struct ScheduleArgs {
    std::string tenant, schedule, workflow, spec, timezone = "UTC", input = "{}";
    int version = 1, catch_up = 0;
    bool json = false;
  };
  auto a = std::make_shared<ScheduleArgs>();
  CLI::App* sc = app.add_subcommand("schedule", "workflow schedules: cron or intervals that start runs");
  sc->require_subcommand(1);

  CLI::App* create =
      sc->add_subcommand("create", "create a schedule (the same definition again does nothing; another one exits 4)");
  create->add_option("TENANT", a->tenant, "the tenant")->required();
  create->add_option("SCHEDULE", a->schedule, "the schedule's name")->required();
  create->add_option("WORKFLOW", a->workflow, "the workflow each fire starts")->required();
  create->add_option("VERSION", a->version, "its version (>= 1)")->required();
  create->add_option("SPEC", a->spec, "5 cron fields, @hourly/@daily/@weekly/@monthly/@yearly, or '@every 15m'")
      ->required();
  create->add_option("--timezone", a->timezone, "the zone cron fields are read in")
      ->type_name("ZONE")
      ->capture_default_str();
  create->add_option("--catch-up", a->catch_up, "missed fires started besides the newest (0..1000)")
      ->type_name("N")
      ->capture_default_str();
  create->add_option("--input", a->input, "each run's input, JSON")->type_name("JSON")->capture_default_str();
  commands.on(create, [a](Context& ctx) {
    ctx.store().workflows().schedule_create(a->tenant, a->schedule, a->workflow, a->version, a->spec,
                                            ScheduleOptions{a->timezone, a->catch_up, a->input});
    for (const ScheduleInfo& s : ctx.store().workflows().schedule_list(a->tenant))
      if (s.schedule == a->schedule)
        std::cout << "schedule=" << s.schedule << "\nnext_fire=" << iso(s.next_fire) << "\n";
    return exit_done;
  });

  CLI::App* drop = sc->add_subcommand("drop", "drop a schedule (exit 1 if there was none); its runs go on");
  drop->add_option("TENANT", a->tenant, "the tenant")->required();
  drop->add_option("SCHEDULE", a->schedule, "the schedule's name")->required();
  commands.on(drop, [a](Context& ctx) {
    const bool dropped = ctx.store().workflows().schedule_drop(a->tenant, a->schedule);
    std::cout << "dropped=" << (dropped ? "true" : "false") << "\n";
    return dropped ? exit_done : exit_no;
  });

  CLI::App* list = sc->add_subcommand("list", "the tenant's schedules: next and last fire, fires started and skipped");
  list->add_option("TENANT", a->tenant, "the tenant")->required();
  list->add_flag("--json", a->json, "one JSON object instead of key=value lines");
  commands.on(list, [a](Context& ctx) {
    const auto schedules = ctx.store().workflows().schedule_list(a->tenant, ctx.read());
    if (a->json) {
      JsonWriter j;
      j.begin_object().key("schedules").begin_array();
      for (const ScheduleInfo& s : schedules) {
        j.begin_object()
            .field("schedule", s.schedule)
            .field("workflow", s.workflow)
            .field("version", s.version)
            .field("spec", s.spec)
            .field("timezone", s.timezone)
            .field("catch_up", s.catch_up)
            .field("next_fire", iso(s.next_fire))
            .field("fires", s.fires)
            .field("skipped", s.skipped);
        j.key("input").raw(s.input);
        j.key("last_fire");
        s.last_fire ? j.value(iso(*s.last_fire)) : j.null();
        j.end_object();
      }
      j.end_array().end_object();
      std::cout << j.str() << "\n";
    } else {
      for (const ScheduleInfo& s : schedules)
        std::cout << "schedule=" << s.schedule << " workflow=" << s.workflow << "@" << s.version << " spec='" << s.spec
                  << "' timezone=" << s.timezone << " next_fire=" << iso(s.next_fire)
                  << " last_fire=" << (s.last_fire ? iso(*s.last_fire) : std::string()) << " fires=" << s.fires
                  << " skipped=" << s.skipped << "\n";
      std::cout << "schedules=" << schedules.size() << "\n";
    }
    return exit_done;
  });

  CLI::App* tick = sc->add_subcommand("tick", "start the runs of the due schedules (of TENANT, or all)");
  tick->add_option("TENANT", a->tenant, "only this tenant's schedules");
  commands.on(tick, [a](Context& ctx) {
    const int started =
        ctx.store().workflows().schedule_tick(a->tenant.empty() ? std::nullopt : std::optional<std::string>(a->tenant));
    std::cout << "started=" << started << "\n";
    return exit_done;
  });
}

}  // namespace forgeyard::cli
