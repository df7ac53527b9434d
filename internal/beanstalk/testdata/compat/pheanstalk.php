<?php
// Drives a delayq beanstalkd front end with Debian's pheanstalk 4 through
// put, reserve, delete, release, bury, kick and the stats commands.
// Usage: php pheanstalk.php HOST PORT [AUTOLOAD]. Prints "ok" and exits 0
// on success; any failure exits non-zero with a message.
require $argv[3] ?? '/usr/share/php/Pheanstalk/autoload.php';

use Pheanstalk\Pheanstalk;

function check(bool $ok, string $what): void
{
    if (!$ok) {
        fwrite(STDERR, "FAIL: $what\n");
        exit(1);
    }
}

$p = Pheanstalk::create($argv[1], (int) $argv[2]);
$p->useTube('php-orders');
$p->watch('php-orders');
$p->ignore('default');

$a = $p->put('order 1', 10, 0, 60);
$b = $p->put('order 2', 20, 0, 60);
check($a->getId() < $b->getId(), 'ids increase');

$job = $p->reserveWithTimeout(1);
check($job !== null && $job->getData() === 'order 1', 'reserve returns the most urgent job');
$p->delete($job);

$job = $p->reserveWithTimeout(1);
check($job !== null && $job->getData() === 'order 2', 'reserve returns the next job');
$p->release($job, 5, 0);
$job = $p->reserveWithTimeout(1);
check($job !== null && $job->getId() === $b->getId(), 'a released job comes back');
$p->touch($job);
$p->bury($job);
check($p->reserveWithTimeout(0) === null, 'a buried job is not reserved');
check($p->peekBuried()->getId() === $b->getId(), 'peek-buried shows it');

$stats = $p->statsJob($job);
check($stats['state'] === 'buried' && (int) $stats['buries'] === 1, 'stats-job says buried');
check($p->kick(10) === 1, 'kick moves one buried job');
check($p->peekReady()->getId() === $b->getId(), 'peek-ready shows the kicked job');

$tube = $p->statsTube('php-orders');
check((int) $tube['current-jobs-ready'] === 1 && (int) $tube['total-jobs'] === 2, 'stats-tube counts');
check(in_array('php-orders', $p->listTubes(), true), 'list-tubes lists the tube');
check(isset($p->stats()['current-connections']), 'stats answers');

$job = $p->reserve();
$p->delete($job);
check($p->reserveWithTimeout(0) === null, 'the tube is empty');
echo "ok\n";
