// The bearer token is entered once and kept for the tab only (sessionStorage): closing the tab forgets it.
const KEY = "ctxbudget.token";

export const token = () => sessionStorage.getItem(KEY);
export const setToken = (value) => sessionStorage.setItem(KEY, value.trim());
export const forgetToken = () => sessionStorage.removeItem(KEY);
