// Strings of the pages in English and Simplified Chinese. The server picks
// the language from Accept-Language (the <html lang>); the switch's choice
// is kept in localStorage and wins over it.
const dict = {
  en: {
    loading: 'Loading…', back: 'All sales', per_night: 'per night',
    checkin: 'Check-in', nights: 'Nights', rooms_left: 'Rooms left', buy: 'Buy', cancel: 'Cancel the hold',
    'list.title': 'Flash sales', 'list.none': 'No sale is open or coming up.', 'list.open': 'On sale now',
    'list.upcoming': 'Starts {when}', 'list.sold_out': 'Sold out', 'list.failed': 'Could not load the sales.',
    starts_in: 'Starts in {t}', ends_in: 'Ends in {t}', ended: 'This sale has ended.',
    night_left: '{date}: {n} left',
    'state.waiting': 'The sale has not started yet.',
    'state.ready': 'On sale now.',
    'state.signing_in': 'Signing in…',
    'state.solving': 'Checking your browser…',
    'state.buying': 'Buying…',
    'state.queued': 'Queued: your order is being confirmed…',
    'state.held': 'Held for you. Please pay.',
    'state.pay_within': 'Pay within {t}',
    'state.paid': 'Paid. Enjoy your stay!',
    'state.expired': 'The hold expired: the room went back on sale.',
    'state.cancelled': 'You cancelled the hold.',
    'state.failed': 'The order could not be completed: {reason}',
    'state.sold_out': 'Sold out.',
    'state.ended': 'This sale has ended.',
    'state.not_eligible': 'Not eligible: {reason}',
    'state.rate_limited': 'Too many tries. Try again in {n} s.',
    'state.unavailable': 'Busy right now. Try again in {n} s.',
    'state.limit': 'You already have the rooms this sale allows.',
    'state.retry': 'That did not work ({reason}). Please try again.',
    'state.no_token': 'Sign in on the platform to buy.',
    'state.not_found': 'No such sale.',
    'state.pay_platform': 'Pay for it in the app you came from.',
    'state.pay_demo_none': 'Demo: no payment step here (paying needs the operator\u2019s token).',
    signed_in: 'Signed in as {user} (demo)',
    live: 'live', polling: 'updating every {n} s',
    'console.title': 'Operator console', 'console.token': 'Admin token', 'console.signin': 'Sign in',
    'console.signout': 'Sign out', 'console.token_hint': 'Kept in this tab\u2019s session storage only.',
    'console.bad_token': 'That token was refused.', 'console.breaker': 'Breaker',
    'console.force_open': 'Force open', 'console.force_closed': 'Force closed', 'console.force_auto': 'Automatic',
    'console.no_breaker': 'no breaker (embedded engine)', 'console.ready': 'Ready', 'console.not_ready': 'Not ready',
    'console.engine': 'engine', 'console.database': 'database', 'console.selling': 'selling from',
    'console.date': 'Night', 'console.stock': 'Stock', 'console.available': 'Available', 'console.held': 'Held',
    'console.sold': 'Sold', 'console.audit': 'Audit', 'console.balanced': 'balanced', 'console.unbalanced': 'NOT balanced',
    'console.findings': '{n} finding(s)', 'console.preheat': 'Preheat', 'console.repair': 'Repair audit',
    'console.done': '{what}: done.', 'console.error': '{what}: {msg}', 'console.updated': 'Updated {t}',
    'console.no_sales': 'No sale is open or coming up.',
  },
  'zh-CN': {
    loading: '加载中…', back: '全部特卖', per_night: '每晚',
    checkin: '入住日期', nights: '晚数', rooms_left: '剩余房间', buy: '立即抢购', cancel: '取消预留',
    'list.title': '限时特卖', 'list.none': '暂无进行中或即将开始的特卖。', 'list.open': '正在抢购',
    'list.upcoming': '{when} 开始', 'list.sold_out': '已售罄', 'list.failed': '无法加载特卖列表。',
    starts_in: '距开始 {t}', ends_in: '距结束 {t}', ended: '本场特卖已结束。',
    night_left: '{date}：剩 {n} 间',
    'state.waiting': '特卖尚未开始。',
    'state.ready': '正在抢购。',
    'state.signing_in': '登录中…',
    'state.solving': '正在验证您的浏览器…',
    'state.buying': '抢购中…',
    'state.queued': '排队中：正在确认您的订单…',
    'state.held': '已为您预留，请尽快支付。',
    'state.pay_within': '请在 {t} 内支付',
    'state.paid': '支付成功，祝您入住愉快！',
    'state.expired': '预留已过期，房间已重新开放。',
    'state.cancelled': '您已取消预留。',
    'state.failed': '订单未能完成：{reason}',
    'state.sold_out': '已售罄。',
    'state.ended': '本场特卖已结束。',
    'state.not_eligible': '不符合购买条件：{reason}',
    'state.rate_limited': '尝试次数过多，请 {n} 秒后再试。',
    'state.unavailable': '系统繁忙，请 {n} 秒后再试。',
    'state.limit': '您已达到本场特卖的购买上限。',
    'state.retry': '操作未成功（{reason}），请重试。',
    'state.no_token': '请先在平台登录后再购买。',
    'state.not_found': '没有这场特卖。',
    'state.pay_platform': '请回到您来的应用完成支付。',
    'state.pay_demo_none': '演示模式：此处没有支付步骤（支付需要运营令牌）。',
    signed_in: '已登录：{user}（演示）',
    live: '实时', polling: '每 {n} 秒更新',
    'console.title': '运营控制台', 'console.token': '管理令牌', 'console.signin': '登录',
    'console.signout': '退出', 'console.token_hint': '仅保存在此标签页的会话存储中。',
    'console.bad_token': '令牌被拒绝。', 'console.breaker': '熔断器',
    'console.force_open': '强制打开', 'console.force_closed': '强制关闭', 'console.force_auto': '自动',
    'console.no_breaker': '无熔断器（内置引擎）', 'console.ready': '就绪', 'console.not_ready': '未就绪',
    'console.engine': '库存引擎', 'console.database': '数据库', 'console.selling': '售卖来源',
    'console.date': '日期', 'console.stock': '库存', 'console.available': '可售', 'console.held': '预留',
    'console.sold': '已售', 'console.audit': '对账', 'console.balanced': '平衡', 'console.unbalanced': '不平衡',
    'console.findings': '{n} 项发现', 'console.preheat': '预热', 'console.repair': '修复对账',
    'console.done': '{what}：完成。', 'console.error': '{what}：{msg}', 'console.updated': '更新于 {t}',
    'console.no_sales': '暂无进行中或即将开始的特卖。',
  },
};

const KEY = 'flashsale.lang';

function stored() {
  try { return localStorage.getItem(KEY); } catch { return null; }
}

export let lang = dict[stored()] ? stored() : (dict[document.documentElement.lang] ? document.documentElement.lang : 'en');

// t returns the string for key with {name} replaced from vars.
export function t(key, vars = {}) {
  const s = (dict[lang] && dict[lang][key]) || dict.en[key] || key;
  return s.replace(/\{(\w+)\}/g, (_, k) => (k in vars ? String(vars[k]) : ''));
}

// apply fills every [data-i18n] element and labels the switch.
export function apply() {
  document.documentElement.lang = lang;
  for (const el of document.querySelectorAll('[data-i18n]')) el.textContent = t(el.dataset.i18n);
  const sw = document.getElementById('lang');
  if (sw) sw.textContent = lang === 'en' ? '中文' : 'English';
}

// setupSwitch wires the language button; onChange re-renders what the
// page drew itself.
export function setupSwitch(onChange) {
  apply();
  const sw = document.getElementById('lang');
  if (!sw) return;
  sw.addEventListener('click', () => {
    lang = lang === 'en' ? 'zh-CN' : 'en';
    try { localStorage.setItem(KEY, lang); } catch { /* private mode: this page only */ }
    apply();
    if (onChange) onChange();
  });
}

// money formats minor units (fen, cents).
export function money(minor, currency) {
  try {
    return new Intl.NumberFormat(lang, { style: 'currency', currency }).format(minor / 100);
  } catch {
    return (minor / 100).toFixed(2) + ' ' + currency;
  }
}

// clock formats a duration in ms as h:mm:ss or m:ss.
export function clock(ms) {
  const s = Math.max(0, Math.ceil(ms / 1000));
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
  const pad = (n) => String(n).padStart(2, '0');
  return h > 0 ? `${h}:${pad(m)}:${pad(sec)}` : `${m}:${pad(sec)}`;
}
