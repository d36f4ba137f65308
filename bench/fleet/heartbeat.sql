-- One runner's heartbeat in the daemon registry: its registration renewed for 30 s (bench/fleet.sh
-- runs this at :runners / 10 per second, so each runner beats about every 10 s).
\set r random(1, :runners)
SELECT forgeyard.app_daemon_register('fleet', 'runner-' || :r, 0, 0, '30 seconds');
